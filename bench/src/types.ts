/**
 * The clients that measure each route: `node` in the bench process (zeromq.js for the floor, `ws`
 * through a server) and `python` in a process of its own with blocking receive loops
 * (python_client.py: pyzmq for the floor, websocket-client through a server). A route's value is the
 * better of the two, for the floor and the servers alike.
 */
export const CLIENTS = ['node', 'python'] as const;

export type ClientName = (typeof CLIENTS)[number];

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

/** MiB/s of a cell printing 1 MiB writes, from its first output to idle. */
export interface IThroughput {
  mbps: number;
  /** Whether every byte printed arrived. */
  complete: boolean;
}

/** How long every listener took to receive every line of a cell, and the lines that never came. */
export interface IFanOut {
  /** ms from sending the cell until every listener had every line; NaN when lines were lost. */
  ms: number;
  lost: number;
}

/**
 * A kernel started through one of the paths compared, with the client that measures it: in the bench
 * process (websockets, the Node ZeroMQ floor) or in a process of its own (the pyzmq floor).
 */
export interface IBenchKernel {
  /** Wait until the driving client receives the kernel's output (a SUB socket joins late). */
  untilListening(): Promise<void>;
  /** Round trips of `pass`, ms: `count` of them, or fewer if `maxMs` runs out first. */
  roundTrips(count: number, maxMs?: number): Promise<number[]>;
  /** A cell prints `mb` MiB in 1 MiB writes. */
  throughput(mb: number): Promise<IThroughput>;
  /** Make `count` receivers of the kernel's output in all (the driving client included), all receiving. */
  openListeners(count: number): Promise<void>;
  /** A cell prints `lines` lines, flushing each; every listener must receive every line. */
  fanOut(lines: number): Promise<IFanOut>;
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
