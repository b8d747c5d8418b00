/**
 * The one queue where client messages wait for a kernel: in order, sent on in order once the kernel
 * takes them, and when full it refuses the newest and keeps what waits.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { MessageQueue, type ClientChannel } from '../src/protocol';

/** A message whose only part names it. */
function message(name: string): [ClientChannel, Buffer[]] {
  return ['shell', [Buffer.from(name)]];
}

/** A kernel that takes `room` more messages (then declines them) and records what it took. */
function kernel(): {
  took: string[];
  room: number;
  deliver: (channel: ClientChannel, parts: Buffer[]) => boolean;
} {
  const state = {
    took: [] as string[],
    room: Infinity,
    deliver: (_channel: ClientChannel, parts: Buffer[]) => {
      if (state.room <= 0) {
        return false;
      }
      state.room--;
      state.took.push(parts[0].toString());
      return true;
    }
  };
  return state;
}

function queue(
  limit?: number,
  byteLimit?: number
): { queue: MessageQueue; logged: string[] } {
  const logged: string[] = [];
  const logger = pino(
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        logged.push(JSON.parse(chunk.toString()).msg);
        done();
      }
    })
  );
  return { queue: new MessageQueue({ logger, limit, byteLimit }), logged };
}

describe('MessageQueue', () => {
  it('sends at once while the kernel takes messages, and keeps the order across a pause', () => {
    const { queue: q } = queue();
    const k = kernel();
    q.send(...message('a'), k.deliver);
    k.room = 0;
    q.send(...message('b'), k.deliver);
    q.send(...message('c'), undefined);
    expect(k.took).toEqual(['a']);
    expect(q.length).toBe(2);
    // The kernel takes messages again: a new one waits behind those that came first.
    k.room = Infinity;
    q.send(...message('d'), k.deliver);
    expect(k.took).toEqual(['a']);
    q.flush(k.deliver);
    expect(k.took).toEqual(['a', 'b', 'c', 'd']);
    expect(q.length).toBe(0);
  });

  it('stops flushing where the kernel declines, keeping that message first in line', () => {
    const { queue: q } = queue();
    const k = kernel();
    k.room = 0;
    for (const name of ['a', 'b', 'c']) {
      q.send(...message(name), k.deliver);
    }
    // It takes one, then declines again.
    k.room = 1;
    q.flush(k.deliver);
    expect(k.took).toEqual(['a']);
    expect(q.length).toBe(2);
    k.room = Infinity;
    q.flush(k.deliver);
    expect(k.took).toEqual(['a', 'b', 'c']);
  });

  it('refuses the newest messages when full, keeps what waits, and says so in the log', () => {
    const { queue: q, logged } = queue(3);
    const k = kernel();
    k.room = 0;
    for (const name of ['a', 'b', 'c', 'd', 'e']) {
      q.send(...message(name), k.deliver);
    }
    expect(q.length).toBe(3);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatch(/queue is full/);
    k.room = Infinity;
    q.flush(k.deliver);
    expect(k.took).toEqual(['a', 'b', 'c']);
    expect(logged).toHaveLength(2);
    expect(logged[1]).toMatch(/refused/);
    // Room again: nothing more is refused.
    q.send(...message('f'), k.deliver);
    expect(k.took).toEqual(['a', 'b', 'c', 'f']);
  });

  it('refuses a message that would take the waiting bytes past the byte limit', () => {
    const { queue: q, logged } = queue(undefined, 10);
    const k = kernel();
    k.room = 0;
    // 4 + 4 bytes wait; 4 more would make 12 > 10; a 2-byte one still fits.
    for (const name of ['aaaa', 'bbbb', 'cccc', 'dd']) {
      q.send(...message(name), k.deliver);
    }
    expect(q.length).toBe(3);
    expect(q.byteLength).toBe(10);
    expect(logged[0]).toMatch(/queue is full/);
    k.room = Infinity;
    q.flush(k.deliver);
    expect(k.took).toEqual(['aaaa', 'bbbb', 'dd']);
    expect(q.byteLength).toBe(0);
  });

  it('drops what waits when the kernel is gone', () => {
    const { queue: q } = queue();
    const k = kernel();
    k.room = 0;
    q.send(...message('a'), k.deliver);
    q.clear();
    k.room = Infinity;
    q.flush(k.deliver);
    expect(k.took).toEqual([]);
  });
});
