import type {
  IBenchMessage,
  IKernelClient,
  IMessageSource,
  RequestChannel
} from './types';

/** How long a request may take before the bench gives up on it. */
export const REQUEST_TIMEOUT_MS = 60000;

/** What to wait for after sending a request. */
export interface IRequestOptions {
  /** Also wait for the kernel's `idle` status for the request (default true). */
  idle?: boolean;
  /** Called for every iopub message of the request, in order. */
  onIopub?: (message: IBenchMessage) => void;
  /** Called with the request's msg_id once it is sent. */
  onSent?: (msgId: string) => void;
  timeoutMs?: number;
}

/** Send a request and resolve with its reply once the reply (and, by default, `idle`) arrived. */
export function request(
  client: IKernelClient,
  channel: RequestChannel,
  msgType: string,
  content: unknown,
  options: IRequestOptions = {}
): Promise<IBenchMessage> {
  const waitIdle = options.idle ?? true;
  const timeoutMs = options.timeoutMs ?? REQUEST_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    let msgId = '';
    let reply: IBenchMessage | undefined;
    let idle = false;
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`no ${msgType} reply within ${timeoutMs} ms`));
    }, timeoutMs);
    const unsubscribe = client.subscribe(message => {
      if (message.parentId !== msgId) {
        return;
      }
      if (message.channel === 'iopub') {
        options.onIopub?.(message);
        idle ||= isIdle(message);
      } else if (message.msgType.endsWith('_reply')) {
        reply = message;
      }
      if (reply && (idle || !waitIdle)) {
        clearTimeout(timer);
        unsubscribe();
        resolve(reply);
      }
    });
    msgId = client.send(channel, msgType, content);
    options.onSent?.(msgId);
  });
}

/** Run code; resolve with the execute_reply once the kernel is idle again. */
export async function execute(
  client: IKernelClient,
  code: string,
  options: Pick<IRequestOptions, 'onIopub' | 'onSent'> = {}
): Promise<IBenchMessage> {
  const reply = await request(
    client,
    'shell',
    'execute_request',
    {
      code,
      silent: false,
      store_history: false,
      user_expressions: {},
      allow_stdin: false,
      stop_on_error: true
    },
    options
  );
  if (reply.content.status !== 'ok') {
    throw new Error(
      `execution failed: ${JSON.stringify(reply.content).slice(0, 400)}`
    );
  }
  return reply;
}

/** Whether a message is an `idle` status. */
export function isIdle(message: IBenchMessage): boolean {
  return (
    message.msgType === 'status' && message.content.execution_state === 'idle'
  );
}

/**
 * Wait until every listener receives the kernel's output: ask for kernel_info until each has seen the
 * status of one of those requests (a SUB socket only receives once its subscription reached the kernel,
 * which can be after the kernel first answers on shell).
 */
export async function untilListening(
  client: IKernelClient,
  listeners: readonly IMessageSource[],
  timeoutMs = 30000
): Promise<void> {
  const asked: string[] = [];
  const seen = listeners.map(() => new Set<string>());
  const unsubscribers = listeners.map((listener, i) =>
    listener.subscribe(message => {
      if (message.msgType === 'status' && message.parentId !== undefined) {
        seen[i].add(message.parentId);
      }
    })
  );
  const deaf = () => seen.filter(ids => !asked.some(id => ids.has(id))).length;
  const deadline = Date.now() + timeoutMs;
  try {
    while (deaf() > 0) {
      if (Date.now() > deadline) {
        throw new Error(
          `${deaf()} listeners received nothing within ${timeoutMs} ms`
        );
      }
      // Only the reply is awaited: the status of a request sent before a SUB socket joined is lost.
      await request(
        client,
        'shell',
        'kernel_info_request',
        {},
        { idle: false, onSent: id => asked.push(id) }
      );
      const until = Date.now() + 100;
      while (deaf() > 0 && Date.now() < until) {
        await sleep(10);
      }
    }
  } finally {
    unsubscribers.forEach(unsubscribe => unsubscribe());
  }
}

/** Resolve after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms));
}
