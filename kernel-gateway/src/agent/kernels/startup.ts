/**
 * A kernel's start-up handshake: Ferry nudges a new kernel process with kernel_info requests until
 * iopub reports idle for one of them, which proves that the kernel answers and that Ferry's iopub
 * subscription is in place. The answers to the nudges are start-up chatter, never relayed to
 * clients, even when they come after the kernel is ready.
 *
 * @packageDocumentation
 */
import type { Channel, MessageParts } from '../../protocol/wire';
import { parseObject, type KernelSockets } from './kernel-sockets';

/**
 * The handshake of a kernel's processes, one start at a time: {@link StartupHandshake.waitUntilReady}
 * for each new process, and {@link StartupHandshake.answers} for each message from the kernel.
 */
export class StartupHandshake {
  /** Whether answers to our nudges are still to come (a cheap test before {@link answers}). */
  get waiting(): boolean {
    return this._requests.size > 0;
  }

  /**
   * Whether a message answers one of our start-up kernel_info requests (its reply on shell, its
   * busy and idle on iopub): start-up chatter, not for clients, even after the kernel is ready (a
   * slow start leaves several requests to answer). An idle tells the start-up that waits for one.
   *
   * @param sockets - where a reply settles the request that waits for it.
   */
  answers(
    channel: Channel,
    parts: MessageParts,
    sockets: Pick<KernelSockets, 'settle'>
  ): boolean {
    const msgId = String(parseObject(parts[1])?.msg_id);
    const left = this._requests.get(msgId);
    if (left === undefined) {
      return false;
    }
    const content = parseObject(parts[3]);
    if (channel === 'iopub') {
      if (content?.execution_state !== 'idle') {
        return true;
      }
      this._onIdle?.();
    } else {
      sockets.settle(msgId, content ?? {});
    }
    // Forgotten once both its reply and its idle are in.
    if (left > 1) {
      this._requests.set(msgId, left - 1);
    } else {
      this._requests.delete(msgId);
    }
    return true;
  }

  /**
   * The "nudge": ask for kernel_info until iopub reports idle for one of the requests. That proves
   * the kernel answers and that our iopub subscription is in place, so no output that follows is lost.
   *
   * @throws Error when the process exits, a port was taken, or the time is up.
   */
  async waitUntilReady(options: StartupHandshake.IWaitOptions): Promise<void> {
    const deadline = Date.now() + options.timeoutMs;
    const died = options.exited.then(() => {
      throw new Error(
        `kernel exited during start-up: ${options.stderrTail().trim().slice(-800)}`
      );
    });
    died.catch(() => undefined);
    const idle = new Promise<'idle'>(resolve => {
      this._onIdle = () => resolve('idle');
    });
    // A new process: what the last one owed us will not come.
    this._requests.clear();
    try {
      for (;;) {
        options.assertOpen();
        // ipykernel that lost a port race says so and then hangs: retry with new ports at once.
        if (options.stderrTail().includes('Address already in use')) {
          throw new Error('a kernel port was taken before the kernel bound it');
        }
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
          const stderr = options.stderrTail().trim().slice(-800);
          throw new Error(
            `kernel did not answer kernel_info_request in time${stderr ? `; its stderr: ${stderr}` : ' (and wrote nothing on stderr)'}`
          );
        }
        const { msgId, reply } = options.request(
          'shell',
          'kernel_info_request',
          {},
          Math.min(1000, remaining)
        );
        // Its reply and its idle are still to come.
        this._requests.set(msgId, 2);
        const answered = reply.then(
          () => 'reply' as const,
          () => 'timeout' as const
        );
        let outcome: string = await Promise.race([answered, idle, died]);
        if (outcome === 'reply') {
          // Answered on shell, but iopub may not be subscribed yet: wait briefly, then nudge again.
          const retry = new Promise<'retry'>(resolve =>
            setTimeout(() => resolve('retry'), 50)
          );
          outcome = await Promise.race([idle, retry, died]);
        }
        if (outcome === 'idle') {
          return;
        }
      }
    } finally {
      this._onIdle = undefined;
    }
  }

  /** Our start-up kernel_info requests, with how many of their messages are still to come. */
  private _requests = new Map<string, number>();
  private _onIdle: (() => void) | undefined;
}

export namespace StartupHandshake {
  export interface IWaitOptions {
    /** Settles when the new process exits. */
    exited: Promise<void>;
    /** The end of what the process wrote on stdout and stderr so far. */
    stderrTail: () => string;
    /** Throws when the kernel was shut down meanwhile. */
    assertOpen: () => void;
    /** Send a request of Ferry's own to the kernel (see {@link KernelSockets.request}). */
    request: KernelSockets['request'];
    /** How long the kernel has to answer. */
    timeoutMs: number;
  }
}
