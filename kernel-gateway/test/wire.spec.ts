import { createHmac } from 'node:crypto';
import {
  deserialize,
  serialize
} from '@jupyterlab/services/lib/kernel/serialize';
import type { KernelMessage } from '@jupyterlab/services';
import {
  createMessage,
  decodeClientFrame,
  decodeFrames,
  encodeFrames,
  filterKernelEnv,
  KernelEnvError,
  kernelWorkingDir,
  MessageSigner,
  OutboundMessage,
  PathOutsideRootError,
  ReplayBuffer,
  REPLAY_ENTRY_OVERHEAD_BYTES,
  V1_SUBPROTOCOL,
  WireError
} from '../src';

const KEY = 'a0b1c2d3-secret';

function sample(buffers: Buffer[] = []): Buffer[] {
  return [
    ...createMessage('stream', { name: 'stdout', text: 'héllo ✓\n' }, 'sess')
      .parts,
    ...buffers
  ];
}

describe('message signing', () => {
  const signer = new MessageSigner(KEY);

  it('signs header, parent, metadata and content with HMAC-SHA256 as jupyter_client does', () => {
    const parts = sample();
    const expected = createHmac('sha256', KEY)
      .update(Buffer.concat(parts.slice(0, 4)))
      .digest('hex');
    expect(signer.sign(parts)).toBe(expected);
  });

  it('round-trips frames with routing identities', () => {
    const parts = sample([Buffer.from([1, 2, 3])]);
    const frames = encodeFrames(signer, parts, [Buffer.from('ident')]);
    const decoded = decodeFrames(signer, frames);
    expect(decoded.identities.map(String)).toEqual(['ident']);
    expect(decoded.parts).toEqual(parts);
  });

  it('rejects a bad signature, a missing delimiter and missing parts', () => {
    const frames = encodeFrames(signer, sample());
    const forged = [...frames];
    forged[1] = Buffer.from('0'.repeat(64));
    expect(() => decodeFrames(signer, forged)).toThrow(
      new WireError('bad message signature')
    );
    const tampered = [...frames];
    tampered[5] = Buffer.from('{"text": "changed"}');
    expect(() => decodeFrames(signer, tampered)).toThrow(
      'bad message signature'
    );
    expect(() => decodeFrames(new MessageSigner('other key'), frames)).toThrow(
      'bad message signature'
    );
    expect(() => decodeFrames(signer, frames.slice(1))).toThrow(
      'no <IDS|MSG> delimiter'
    );
    expect(() => decodeFrames(signer, frames.slice(0, 4))).toThrow(
      'fewer than four message parts'
    );
  });
});

describe('framings against JupyterLab’s own serializer', () => {
  const toArrayBuffer = (b: Buffer) =>
    b.buffer.slice(b.byteOffset, b.byteOffset + b.length) as ArrayBuffer;

  it.each([
    ['v1 without buffers', 'v1', []],
    ['v1 with buffers', 'v1', [Buffer.from([0, 255, 7]), Buffer.alloc(0)]],
    ['legacy JSON', 'legacy', []],
    ['legacy binary', 'legacy', [Buffer.from([9, 8, 7, 6])]]
  ] as const)(
    '%s: what Ferry sends, JupyterLab reads',
    (_title, framing, buffers) => {
      const message = new OutboundMessage('iopub', sample([...buffers]));
      const encoded = message.encode(framing);
      const protocol = framing === 'v1' ? V1_SUBPROTOCOL : '';
      const read = deserialize(
        typeof encoded === 'string'
          ? (encoded as unknown as ArrayBuffer)
          : toArrayBuffer(encoded),
        protocol
      );
      expect(read.channel).toBe('iopub');
      expect(read.header.msg_type).toBe('stream');
      expect(read.content).toEqual({ name: 'stdout', text: 'héllo ✓\n' });
      const got = (read.buffers ?? []).map(b =>
        ArrayBuffer.isView(b)
          ? Buffer.from(b.buffer, b.byteOffset, b.byteLength)
          : Buffer.from(b)
      );
      expect(got).toEqual(buffers);
      // Encoded once, however many clients it goes to.
      expect(message.encode(framing)).toBe(encoded);
    }
  );

  /** The opcode and payload of one whole, unmasked websocket frame. */
  function readFrame(chunks: Buffer[]): { opcode: number; payload: Buffer } {
    const frame = Buffer.concat(chunks);
    const short = frame[1] & 0x7f;
    const [length, start] =
      short === 126
        ? [frame.readUInt16BE(2), 4]
        : short === 127
          ? [Number(frame.readBigUInt64BE(2)), 10]
          : [short, 2];
    expect(frame[0] & 0x80).toBe(0x80);
    expect(frame[1] & 0x80).toBe(0);
    expect(frame.length).toBe(start + length);
    return { opcode: frame[0] & 0x0f, payload: frame.subarray(start) };
  }

  it.each([
    ['v1, small', 'v1', 10, [], 2],
    ['v1, large, with buffers', 'v1', 100000, [Buffer.from([1, 2])], 2],
    ['legacy JSON, small', 'legacy', 10, [], 1],
    ['legacy JSON, large', 'legacy', 100000, [], 1],
    ['legacy binary, large', 'legacy', 100000, [Buffer.from([1, 2])], 2]
  ] as const)(
    '%s: one whole websocket frame for every client, readable by JupyterLab',
    (_title, framing, size, buffers, opcode) => {
      const text = 'ü'.repeat(size);
      const parts = [
        ...createMessage('stream', { name: 'stdout', text }, 'sess').parts,
        ...buffers
      ];
      const message = new OutboundMessage('iopub', parts);
      const chunks = message.wsFrame(framing);
      const frame = readFrame(chunks);
      expect(frame.opcode).toBe(opcode);
      const read = deserialize(
        opcode === 1
          ? (frame.payload.toString('utf8') as unknown as ArrayBuffer)
          : toArrayBuffer(frame.payload),
        framing === 'v1' ? V1_SUBPROTOCOL : ''
      );
      expect(read.channel).toBe('iopub');
      expect(read.content).toEqual({ name: 'stdout', text });
      expect(read.buffers ?? []).toHaveLength(buffers.length);
      // Encoded once, however many clients it goes to; large output is sent from the kernel's buffer.
      expect(message.wsFrame(framing)).toBe(chunks);
      if (size > 1000) {
        expect(chunks).toContain(parts[3]);
      }
    }
  );

  it('sends legacy JSON as valid UTF-8 text even when the kernel’s bytes are not', () => {
    const parts = createMessage(
      'stream',
      { name: 'stdout', text: 'ok' },
      's'
    ).parts;
    // A lone 0xff (invalid UTF-8) inside the JSON string, as a kernel with surrogateescape can send.
    parts[3] = Buffer.concat([
      Buffer.from('{"name":"stdout","text":"a'),
      Buffer.from([0xff]),
      Buffer.from('b"}')
    ]);
    const frame = readFrame(
      new OutboundMessage('iopub', parts).wsFrame('legacy')
    );
    expect(frame.opcode).toBe(1);
    expect(
      new TextDecoder('utf-8', { fatal: true }).decode(frame.payload)
    ).toBeTruthy();
    expect(JSON.parse(frame.payload.toString('utf8')).content.text).toBe(
      'a\ufffdb'
    );
  });

  it.each([
    ['v1', V1_SUBPROTOCOL],
    ['legacy', '']
  ] as const)('%s: what JupyterLab sends, Ferry reads', (framing, protocol) => {
    const msg = {
      channel: 'shell',
      header: {
        msg_id: 'm1',
        msg_type: 'comm_msg',
        session: 's',
        username: 'u',
        date: '',
        version: '5.3'
      },
      parent_header: {},
      metadata: {},
      content: { comm_id: 'c', data: {} },
      buffers: [new Uint8Array([1, 2, 3]).buffer]
    } as unknown as KernelMessage.IMessage;
    const wire = serialize(msg, protocol);
    const data =
      typeof wire === 'string' ? Buffer.from(wire) : Buffer.from(wire);
    const read = decodeClientFrame(data, typeof wire !== 'string', framing);
    expect(read.channel).toBe('shell');
    expect(read.header.msg_id).toBe('m1');
    expect(JSON.parse(read.parts[3].toString())).toEqual({
      comm_id: 'c',
      data: {}
    });
    expect(read.parts.slice(4)).toEqual([Buffer.from([1, 2, 3])]);
  });
});

describe('replay buffer', () => {
  /** What a replayed message is: its channel and parts (the buffer keeps copies). */
  const seen = (messages: Iterable<OutboundMessage>) =>
    [...messages].map(m => ({ channel: m.channel, parts: m.parts }));

  it('keeps the newest messages within its byte cap and says when some were dropped', () => {
    const buffer = new ReplayBuffer(4000);
    const messages = Array.from(
      { length: 20 },
      () => new OutboundMessage('iopub', sample([Buffer.from([1, 2, 3])]))
    );
    // Each message costs its bytes and its entry.
    const cost = messages[0].byteLength + REPLAY_ENTRY_OVERHEAD_BYTES;
    messages.forEach(m => buffer.push(m));
    expect(buffer.byteLength).toBeLessThanOrEqual(4000);
    const kept = [...buffer.since(0, '')];
    expect(kept.length).toBe(Math.floor(4000 / cost));
    expect(seen(kept)).toEqual(seen(messages.slice(20 - kept.length)));
    expect(kept[kept.length - 1].header).toEqual(messages[19].header);
    expect(buffer.hasGap(0)).toBe(true);
    expect(buffer.hasGap(buffer.seq - 1)).toBe(false);
    expect(seen(buffer.since(buffer.seq - 2, ''))).toEqual(
      seen(messages.slice(18))
    );
  });

  it('keeps messages for one session away from the others', () => {
    const buffer = new ReplayBuffer(1 << 20);
    const all = new OutboundMessage('iopub', sample());
    const mine = new OutboundMessage('shell', sample());
    buffer.push(all);
    buffer.push(mine, 'session-a');
    expect(seen(buffer.since(0, 'session-a'))).toEqual(seen([all, mine]));
    expect(seen(buffer.since(0, 'session-b'))).toEqual(seen([all]));
  });
});

describe('kernel environment and working directory policy', () => {
  it('keeps KERNEL_* and allowlisted names only', () => {
    expect(
      filterKernelEnv(
        { KERNEL_A: '1', LANG_X: '2', SECRET_TOKEN: '3', PATH: '/evil' },
        ['LANG_X']
      )
    ).toEqual({ KERNEL_A: '1', LANG_X: '2' });
  });

  it('refuses kept values that are too long or hold NUL', () => {
    expect(() => filterKernelEnv({ KERNEL_A: 'x'.repeat(4097) }, [])).toThrow(
      KernelEnvError
    );
    expect(() => filterKernelEnv({ KERNEL_A: 'a\0b' }, [])).toThrow('NUL');
    // Dropped names are not checked: jupyter_server sends its whole environment.
    expect(filterKernelEnv({ OTHER: 'x'.repeat(9000) }, [])).toEqual({});
  });

  it('puts kernels in their notebook directory and never outside the root', () => {
    expect(kernelWorkingDir('/srv/nb', 'a/b.ipynb')).toBe('/srv/nb/a');
    expect(kernelWorkingDir('/srv/nb', '/a/b.ipynb')).toBe('/srv/nb/a');
    expect(kernelWorkingDir('/srv/nb', undefined)).toBe('/srv/nb');
    expect(() => kernelWorkingDir('/srv/nb', '../x.ipynb')).toThrow(
      PathOutsideRootError
    );
    expect(() => kernelWorkingDir('/srv/nb', 'a/../../nbx/y.ipynb')).toThrow(
      PathOutsideRootError
    );
  });
});
