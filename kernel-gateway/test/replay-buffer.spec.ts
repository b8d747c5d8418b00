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
    expect(kept).toEqual(messages.slice(messages.length - kept.length));
    expect(buffer.hasGap(0)).toBe(true);
  });

  it('lets go of the messages it dropped for its cap at once', async () => {
    const buffer = new ReplayBuffer(64 * 1024);
    const dropped: WeakRef<OutboundMessage>[] = [];
    for (let i = 0; i < 200; i++) {
      const message = output('y'.repeat(32 * 1024));
      dropped.push(new WeakRef(message));
      buffer.push(message);
    }
    // WeakRefs hold their targets until the current job ends.
    await new Promise(resolve => setImmediate(resolve));
    collectGarbage();
    const alive = dropped.filter(ref => ref.deref() !== undefined).length;
    // What the cap allows (two or three messages), not the 200 pushed.
    expect(alive).toBeLessThanOrEqual(3);
    expect([...buffer.since(0, undefined)]).toHaveLength(alive);
  });
});
