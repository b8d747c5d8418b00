/**
 * The replay buffer keeps a kernel's recent output within its byte cap, and lets go of what it
 * dropped at once: a print loop's messages must not pile up in memory behind the cap.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { OutboundMessage, ReplayBuffer } from '../src/channels';
import { createMessage } from '../src/protocol/wire';

/** A real garbage collection, to see what the buffer still holds. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

function output(text: string): OutboundMessage {
  const { parts } = createMessage(
    'stream',
    { name: 'stdout', text },
    'kernel-session'
  );
  return new OutboundMessage('iopub', parts);
}

/** What a replayed message is: its channel and parts (the buffer keeps copies). */
function seen(messages: Iterable<OutboundMessage>) {
  return [...messages].map(m => ({ channel: m.channel, parts: m.parts }));
}

/** The parts copied into `batch`, as views on it (as ZeroMQ hands them over). */
function viewsIn(batch: ArrayBuffer, parts: Buffer[]): Buffer[] {
  let offset = 0;
  return parts.map(part => {
    const view = Buffer.from(batch, offset, part.length);
    offset += part.copy(view);
    return view;
  });
}

/** Push `count` messages whose parts are views on a 256 KiB batch each; WeakRefs to the batches. */
function pushViews(
  buffer: ReplayBuffer,
  count: number
): { batches: WeakRef<ArrayBuffer>[]; messages: OutboundMessage[] } {
  const batches: WeakRef<ArrayBuffer>[] = [];
  const messages: OutboundMessage[] = [];
  for (let i = 0; i < count; i++) {
    const parts = output(`${i}`).parts;
    messages.push(new OutboundMessage('iopub', parts));
    const batch = new ArrayBuffer(256 * 1024);
    batches.push(new WeakRef(batch));
    buffer.push(new OutboundMessage('iopub', viewsIn(batch, parts)));
  }
  return { batches, messages };
}

/**
 * Memory outside the JS heap held by Buffers and ArrayBuffers after real collections: the least of a
 * few, since V8 frees what a collection found dead on a thread of its own, and counts it once freed.
 */
async function arrayBuffers(): Promise<number> {
  let least = Infinity;
  for (let i = 0; i < 5; i++) {
    // WeakRefs and finalizers wait for the current job to end.
    await new Promise(resolve => setImmediate(resolve));
    collectGarbage();
    least = Math.min(least, process.memoryUsage().arrayBuffers);
  }
  return least;
}

describe('ReplayBuffer', () => {
  it('keeps the newest output within its cap and replays it in order', () => {
    const buffer = new ReplayBuffer(4096);
    const messages = Array.from({ length: 50 }, (_, i) =>
      output(`${i}`.padEnd(200, '.'))
    );
    messages.forEach(m => buffer.push(m));
    expect(buffer.byteLength).toBeLessThanOrEqual(4096);
    const kept = [...buffer.since(0, undefined)];
    expect(kept.length).toBeGreaterThan(0);
    expect(seen(kept)).toEqual(
      seen(messages.slice(messages.length - kept.length))
    );
    expect(buffer.hasGap(0)).toBe(true);
  });

  it('lets go of the messages it dropped for its cap at once', async () => {
    const buffer = new ReplayBuffer(64 * 1024);
    const before = await arrayBuffers();
    for (let i = 0; i < 200; i++) {
      buffer.push(output('y'.repeat(32 * 1024)));
    }
    // What the cap allows (one message), not the 200 pushed (6.4 MB).
    expect(buffer.length).toBe(1);
    const held = (await arrayBuffers()) - before;
    expect(held).toBeLessThan(1024 * 1024);
  });

  it('holds copies, never the memory the relayed parts were views on', async () => {
    // ZeroMQ hands a small part over as a view on its whole receive batch, and gRPC as a slice of
    // a larger read: kept as they came, a 200-byte message held each batch alive.
    const buffer = new ReplayBuffer(16 * 2 ** 20);
    // Filled in a function of its own: a suspended async function's frame may hold its last batch.
    const { batches, messages } = pushViews(buffer, 100);
    await arrayBuffers();
    expect(batches.filter(ref => ref.deref() !== undefined)).toHaveLength(0);
    expect(seen(buffer.since(0, undefined))).toEqual(seen(messages));
  });
});
