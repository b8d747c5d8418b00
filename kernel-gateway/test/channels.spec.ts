import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { V1_SUBPROTOCOL } from '../src';
import {
  isStatus,
  KernelSocket,
  parentOf,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';

/**
 * Resolves once the gateway reports the kernel idle: it has relayed everything the kernel
 * published before going idle. The gateway has no event for this, so its REST model is read.
 */
async function untilIdle(gw: ITestGateway, kernelId: string): Promise<void> {
  const deadline = Date.now() + 30000;
  for (;;) {
    const { body } = await gw.api('GET', `/api/kernels/${kernelId}`);
    if ((body as { execution_state?: string }).execution_state === 'idle') {
      return;
    }
    if (Date.now() > deadline) {
      throw new Error(`kernel ${kernelId} never went idle`);
    }
    await new Promise(resolve => setTimeout(resolve, 20));
  }
}

describe('websocket channels', () => {
  let gw: ITestGateway;
  let kernelId: string;

  beforeAll(async () => {
    gw = await startGateway({ maxMessageBytes: 1024 * 1024 });
    kernelId = await startKernel(gw);
  });

  afterAll(async () => {
    await gw.close();
  });

  it('fans iopub out to every client and sends replies only to the one that asked', async () => {
    const clients = await Promise.all([
      KernelSocket.connect(gw, kernelId),
      KernelSocket.connect(gw, kernelId, { framing: 'v1' }),
      KernelSocket.connect(gw, kernelId)
    ]);
    const run = await clients[0].execute('print("to everyone")');
    expect(run.stdout).toBe('to everyone\n');
    const msgId = parentOf(run.reply)!;
    for (const other of clients.slice(1)) {
      const stream = await other.next(
        m => m.header.msg_type === 'stream' && parentOf(m) === msgId
      );
      expect(stream.content).toMatchObject({ text: 'to everyone\n' });
      await other.next(m => isStatus(m, 'idle') && parentOf(m) === msgId);
      expect(
        other.received.some(m => m.header.msg_type === 'execute_reply')
      ).toBe(false);
    }
    await Promise.all(clients.map(c => c.close()));
  });

  it('replays output produced while the only client was away (no session_id)', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-away-'));
    const gone = path.join(dir, 'gone');
    const first = await KernelSocket.connect(gw, kernelId);
    // The kernel prints only once its only client has gone, and the client comes back only once
    // the gateway has seen the kernel go idle (after the output, on the same iopub stream): the
    // output can reach the new socket by replay alone.
    const msgId = first.send('shell', 'execute_request', {
      code: [
        'import os, time',
        `while not os.path.exists(${JSON.stringify(gone)}): time.sleep(0.02)`,
        'print("while you were away")'
      ].join('\n'),
      silent: false,
      allow_stdin: false
    });
    await first.next(
      m => m.header.msg_type === 'execute_input' && parentOf(m) === msgId
    );
    await first.close();
    await fs.writeFile(gone, '');
    await untilIdle(gw, kernelId);
    // Reconnect as jupyter_server's gateway client does: a new socket, no session_id.
    const second = await KernelSocket.connect(gw, kernelId);
    const stream = await second.next(
      m => m.header.msg_type === 'stream' && parentOf(m) === msgId
    );
    expect(stream.content).toMatchObject({ text: 'while you were away\n' });
    // The reply to the request the first socket made reaches its successor too.
    const reply = await second.next(
      m => m.header.msg_type === 'execute_reply' && parentOf(m) === msgId
    );
    expect(reply.content).toMatchObject({ status: 'ok' });
    await second.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('replays what a session missed while other clients stayed connected', async () => {
    const sessionId = randomUUID();
    const watcher = await KernelSocket.connect(gw, kernelId);
    const leaving = await KernelSocket.connect(gw, kernelId, {
      sessionId,
      framing: 'v1'
    });
    await leaving.close();
    const run = await watcher.execute('print("missed by the session")');
    const msgId = parentOf(run.reply)!;
    const back = await KernelSocket.connect(gw, kernelId, {
      sessionId,
      framing: 'v1'
    });
    const stream = await back.next(
      m => m.header.msg_type === 'stream' && parentOf(m) === msgId
    );
    expect(stream.content).toMatchObject({ text: 'missed by the session\n' });
    // A new session that never was here gets no replay while others are connected.
    const fresh = await KernelSocket.connect(gw, kernelId, {
      sessionId: randomUUID()
    });
    const probe = await fresh.execute('print("probe")');
    expect(
      fresh.received.some(
        m => parentOf(m) === msgId && m.header.msg_type === 'stream'
      )
    ).toBe(false);
    expect(probe.stdout).toBe('probe\n');
    await Promise.all([watcher.close(), back.close(), fresh.close()]);
  });

  it('takes a legacy message without a channel field as shell, as jupyter_server does', async () => {
    const client = await KernelSocket.connect(gw, kernelId);
    const msgId = randomUUID();
    client.socket.send(
      JSON.stringify({
        header: {
          msg_id: msgId,
          msg_type: 'kernel_info_request',
          session: client.session,
          username: 'test',
          date: new Date().toISOString(),
          version: '5.3'
        },
        parent_header: {},
        metadata: {},
        content: {}
      })
    );
    const reply = await client.next(
      m => m.header.msg_type === 'kernel_info_reply' && parentOf(m) === msgId
    );
    expect(reply.channel).toBe('shell');
    expect(reply.content).toMatchObject({ status: 'ok' });
    await client.close();
  });

  it('accepts legacy binary messages, also inside text frames', async () => {
    const client = await KernelSocket.connect(gw, kernelId);
    const msgId = randomUUID();
    const json = Buffer.from(
      JSON.stringify({
        channel: 'shell',
        header: {
          msg_id: msgId,
          msg_type: 'execute_request',
          session: client.session,
          username: 'test',
          date: new Date().toISOString(),
          version: '5.3'
        },
        parent_header: {},
        metadata: {},
        content: { code: 'print("binary in text")', silent: false }
      })
    );
    const extra = Buffer.from([0, 1, 2, 3, 255]);
    const frame = Buffer.alloc(12 + json.length + extra.length);
    frame.writeUInt32BE(2, 0);
    frame.writeUInt32BE(12, 4);
    frame.writeUInt32BE(12 + json.length, 8);
    json.copy(frame, 12);
    extra.copy(frame, 12 + json.length);
    // A text frame holding binary, as jupyter_server's gateway client forwards it.
    client.socket.send(frame, { binary: false });
    const stream = await client.next(
      m => m.header.msg_type === 'stream' && parentOf(m) === msgId
    );
    expect(stream.content).toMatchObject({ text: 'binary in text\n' });
    await client.close();
  });

  async function rawSocket(protocols: string[] = []): Promise<WebSocket> {
    const socket = new WebSocket(
      `${gw.url.replace('http', 'ws')}/api/kernels/${kernelId}/channels?token=${gw.token}`,
      protocols
    );
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    return socket;
  }

  function closeOf(
    socket: WebSocket
  ): Promise<{ code: number; reason: string }> {
    return new Promise(resolve =>
      socket.once('close', (code, reason) =>
        resolve({ code, reason: reason.toString() })
      )
    );
  }

  const badFrames: [
    string,
    string[],
    (s: WebSocket) => void,
    number,
    RegExp
  ][] = [
    ['malformed JSON', [], s => s.send('{"header": '), 1007, /malformed JSON/],
    ['a JSON array', [], s => s.send('[1, 2]'), 1007, /JSON object/],
    [
      'an unknown channel',
      [],
      s =>
        s.send(
          JSON.stringify({
            channel: 'hb',
            header: { msg_id: 'a', msg_type: 'x' }
          })
        ),
      1007,
      /unknown channel "hb"/
    ],
    [
      'a header without msg_type',
      [],
      s =>
        s.send(JSON.stringify({ channel: 'shell', header: { msg_id: 'a' } })),
      1007,
      /msg_id and msg_type/
    ],
    [
      'a message on iopub',
      [],
      s =>
        s.send(
          JSON.stringify({
            channel: 'iopub',
            header: { msg_id: 'a', msg_type: 'stream' }
          })
        ),
      1008,
      /cannot send on iopub/
    ],
    [
      'garbled binary',
      [],
      s => s.send(Buffer.from([0, 0, 0, 9, 1, 2])),
      1007,
      /neither JSON nor a legacy binary/
    ],
    [
      'legacy offsets past the end',
      [],
      s => s.send(Buffer.from([0, 0, 0, 1, 0, 0, 1, 0])),
      1007,
      /offsets/
    ],
    [
      'a text frame on v1',
      [V1_SUBPROTOCOL],
      s => s.send('{}'),
      1003,
      /text frames are not part of/
    ],
    [
      'a truncated v1 frame',
      [V1_SUBPROTOCOL],
      s => s.send(Buffer.from([7, 0, 0, 0, 0, 0, 0, 0, 1])),
      1007,
      /offset count/
    ],
    [
      'an oversized message',
      [],
      s => s.send(Buffer.alloc(2 * 1024 * 1024, 0x7b)),
      1009,
      /^$/
    ]
  ];

  it.each(badFrames)(
    'closes on %s with a clear code and keeps serving others',
    async (_title, protocols, sendBad, code, reason) => {
      const bystander = await KernelSocket.connect(gw, kernelId);
      const socket = await rawSocket(protocols);
      const closed = closeOf(socket);
      sendBad(socket);
      const result = await closed;
      expect(result.code).toBe(code);
      expect(result.reason).toMatch(reason);
      expect((await bystander.execute('print("still here")')).stdout).toBe(
        'still here\n'
      );
      await bystander.close();
    }
  );

  it('tells clients when the kernel shuts down by closing with 1001', async () => {
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    await gw.api('DELETE', `/api/kernels/${id}`);
    expect(await client.closed).toEqual({
      code: 1001,
      reason: 'kernel shut down'
    });
  });
});

describe('iopub rate limits', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    gw = await startGateway({
      rateLimits: { messagesPerSecond: 20, windowMs: 1000 }
    });
  });

  afterAll(async () => {
    await gw.close();
  });

  it('drops output over the limit and tells the client', async () => {
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    const run = await client.execute(
      'import sys\nfor i in range(300):\n    print(i)\n    sys.stdout.flush()'
    );
    expect(run.reply.content).toMatchObject({ status: 'ok' });
    const notice = await client.next(
      m =>
        m.header.msg_type === 'stream' &&
        String((m.content as { text?: string }).text).includes(
          'IOPub rate limit'
        )
    );
    expect(notice.content).toMatchObject({ name: 'stderr' });
    const printed = run.stdout.split('\n').filter(Boolean).length;
    expect(printed).toBeLessThan(300);
    await client.close();
  });
});
