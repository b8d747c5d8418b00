/** The channels the bench sends requests on. */
export type RequestChannel = 'shell' | 'control';

/** A kernel message as the bench sees it: only the fields the measurements read. */
export interface IBenchMessage {
  channel: string;
  msgType: string;
  /** The msg_id of the request this message answers or reports on. */
  parentId: string | undefined;
  content: Record<string, unknown>;
}

/** A handler of kernel messages. */
export type MessageHandler = (message: IBenchMessage) => void;

/** Something that receives a kernel's messages: a websocket, or a ZeroMQ SUB socket for the floor. */
export interface IMessageSource {
  /** Call `handler` for every message until the returned function is called. */
  subscribe(handler: MessageHandler): () => void;
  close(): Promise<void>;
}

/** A client that also sends requests to the kernel. */
export interface IKernelClient extends IMessageSource {
  /** Send a request and return its msg_id. */
  send(channel: RequestChannel, msgType: string, content: unknown): string;
}

/** A kernel started through one of the paths compared. */
export interface IBenchKernel {
  /** The client that drives the kernel; it sees replies and output. */
  readonly client: IKernelClient;
  /** One more receiver of the kernel's output. */
  addListener(): Promise<IMessageSource>;
  /** Shut the kernel down, leaving no process behind. */
  shutdown(): Promise<void>;
}

/** One of the paths compared: the ZeroMQ floor, Ferry or jupyter_server. */
export interface IBenchTarget {
  readonly name: string;
  /** Start a kernel and resolve once it has answered kernel_info over this path. */
  startKernel(): Promise<IBenchKernel>;
}

/** The handlers of one message source, called in turn for each message. */
export class Subscribers {
  /** Add a handler; call the returned function to remove it. */
  add(handler: MessageHandler): () => void {
    this._handlers.add(handler);
    return () => {
      this._handlers.delete(handler);
    };
  }

  /** Hand a message to every handler. */
  emit(message: IBenchMessage): void {
    for (const handler of this._handlers) {
      handler(message);
    }
  }

  private _handlers = new Set<MessageHandler>();
}
