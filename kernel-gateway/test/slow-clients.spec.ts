/**
 * A client that does not read cannot make the gateway hold the kernel's output for it without bound:
 * past its buffer its output is skipped (a fast client beside it gets everything), it is told what it
 * missed once it catches up, and one that stays behind is closed with 1013. A real `ferry gateway`
 * process with its embedded worker and real ipykernels.
 */
import type { Socket } from 'node:net';
import {
  isStatus,
  KernelSocket,
  parentOf,
  pollUntil,
  startKernel
} from './helpers';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';

/** The TCP connection under a client's websocket. */
function connectionOf(client: KernelSocket): Socket {
  return (client.socket as unknown as { _socket: Socket })._socket;
}

describe('clients that read too slowly', () => {
  // In a process of its own, as in use: a client in the gateway's process reads only when the
  // gateway yields, so it would look slow.
  let gw: IGatewayProcess;

  beforeAll(async () => {
    gw = await startGatewayProcess([
      '--client-buffer-mb',
      '2',
      '--slow-client-timeout',
      '10'
    ]);
  });

  afterAll(async () => {
    await gw?.stop();
  });

  it('skip output while behind and are told, while a fast client gets every line', async () => {
    const id = await startKernel(gw);
    const fast = await KernelSocket.connect(gw, id);
    const slow = await KernelSocket.connect(gw, id);
    connectionOf(slow).pause();
    const run = await fast.execute(
      // About 10 MB/s: as fast as this test's own client reads (the gateway relays far faster).
      "import time\nfor i in range(800):\n    print(str(i).rjust(6) + 'y' * 50_000, flush=True)\n    time.sleep(0.005)"
    );
    expect(run.reply.content).toMatchObject({ status: 'ok' });
    const numbers = run.stdout
      .split('\n')
      .filter(Boolean)
      .map(line => Number(line.slice(0, 6)));
    expect(numbers).toEqual(Array.from({ length: 800 }, (_, i) => i));
    const msgId = parentOf(run.reply)!;
    // The slow client reads again: it gets the reply, the idle status and a notice under the cell.
    connectionOf(slow).resume();
    await slow.next(m => isStatus(m, 'idle') && parentOf(m) === msgId);
    const notice = await slow.next(
      m =>
        m.header.msg_type === 'stream' &&
        String((m.content as { text: string }).text).startsWith('[Ferry]')
    );
    expect((notice.content as { text: string }).text).toMatch(
      /^\[Ferry\] \d+ output message\(s\) \([\d.]+ MiB\) were not sent to this connection: it could not keep up with the kernel\.\n$/
    );
    expect(parentOf(notice)).toBe(msgId);
    const skipped = Number(
      /(\d+) output message/.exec((notice.content as { text: string }).text)![1]
    );
    expect(skipped).toBeGreaterThan(0);
    const slowLines = slow.received
      .filter(m => m.header.msg_type === 'stream' && parentOf(m) === msgId)
      .map(m => (m.content as { text: string }).text)
      .join('')
      .split('\n')
      .filter(line => line && !line.startsWith('[Ferry]'));
    expect(slowLines.length).toBeLessThan(800);
    expect(
      slow.received.some(
        m => m.header.msg_type === 'execute_reply' && parentOf(m) === msgId
      )
    ).toBe(false); // replies go to the client that asked
    // Both keep working.
    expect((await slow.execute('print(1 + 1)')).stdout).toBe('2\n');
    await fast.close();
    await slow.close();
    expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
  }, 60000);

  it('close a client that stays behind with 1013, and keep serving the others', async () => {
    const id = await startKernel(gw);
    const fast = await KernelSocket.connect(gw, id);
    const stuck = await KernelSocket.connect(gw, id);
    connectionOf(stuck).pause();
    const msgId = fast.send('shell', 'execute_request', {
      code: "import time\nwhile True:\n    print('y' * 50_000, flush=True)\n    time.sleep(0.01)",
      silent: false
    });
    await pollUntil(
      async () => (await gw.api('GET', `/api/kernels/${id}`)).body.connections,
      connections => connections === 1
    );
    connectionOf(stuck).resume();
    expect(await stuck.closed).toMatchObject({ code: 1013 });
    // The other client still gets the output.
    const before = fast.received.length;
    await fast.next(
      m =>
        m.header.msg_type === 'stream' &&
        parentOf(m) === msgId &&
        fast.received.indexOf(m) >= before
    );
    await gw.api('POST', `/api/kernels/${id}/interrupt`);
    await fast.close();
    expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
  }, 60000);
});
