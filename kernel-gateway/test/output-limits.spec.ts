/**
 * A kernel message too large to relay is replaced by a notice under the cell that printed it, without
 * building a string of it, and the kernel stays usable: a real gateway, a real embedded worker and a
 * real ipykernel, in both framings. One far over the limit is never received whole: the gateway's
 * memory stays below its size.
 */
import { readFileSync } from 'node:fs';
import { createLogger, Worker } from '../src';
import { startGatewayProcess } from './gateway-process';
import { startWorker } from './workers';
import {
  KernelSocket,
  parentOf,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';

/** The peak resident memory of a process, in MiB (`VmHWM`). */
function peakRssMib(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB$/m.exec(status)![1]) / 1024;
}

describe('kernel messages over the output limit', () => {
  let gw: ITestGateway;

  afterEach(async () => {
    await gw?.close();
  });

  it.each(['legacy', 'v1'] as const)(
    'a 1.5 MB print under a 1 MiB limit becomes a notice, and the kernel runs on (%s)',
    async framing => {
      gw = await startGateway({
        worker: new Worker({
          logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
          maxOutputBytes: 2 ** 20,
          kernelTimings: { shutdownWaitMs: 2000 }
        })
      });
      const id = await startKernel(gw);
      const client = await KernelSocket.connect(gw, id, { framing });
      // Received (within the frame limit's headroom) and replaced by an exact notice.
      const big = await client.execute("print('y' * 1_500_000)");
      expect(big.reply.content).toMatchObject({ status: 'ok' });
      expect(big.stdout).toBe('');
      expect(big.stderr).toMatch(
        /^\[Ferry\] A message of 1\.4 MiB from the kernel was not relayed: messages over 1\.0 MiB are dropped \(--max-output-mb\)\.\n$/
      );
      // A reply over the limit is answered as an error, not left unanswered.
      const msgId = client.send('shell', 'execute_request', {
        code: '',
        silent: false,
        user_expressions: { big: "'y' * 1_500_000" }
      });
      const reply = await client.next(
        m =>
          m.header.msg_type === 'execute_reply' &&
          (m.parent_header as { msg_id?: string }).msg_id === msgId
      );
      expect(reply.content).toMatchObject({
        status: 'error',
        ename: 'MessageTooLarge'
      });
      const after = await client.execute("print('still here')");
      expect(after.stdout).toBe('still here\n');
      await client.close();
    },
    60000
  );

  it.each(['legacy', 'v1'] as const)(
    'a 30 MB print under a 1 MiB limit is dropped as it arrives, with a notice, and the kernel runs on (%s)',
    async framing => {
      gw = await startGateway({
        worker: new Worker({
          logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
          maxOutputBytes: 2 ** 20,
          kernelTimings: { shutdownWaitMs: 2000 }
        })
      });
      const id = await startKernel(gw);
      const client = await KernelSocket.connect(gw, id, { framing });
      // Its execution ends as usual (reply, then idle) though its output went with the connection.
      const big = await client.execute("print('y' * 30_000_000)");
      expect(big.reply.content).toMatchObject({ status: 'ok' });
      expect(big.stdout).toBe('');
      expect(big.stderr).toBe(
        '[Ferry] A message from the kernel over 1.0 MiB was dropped as it arrived ' +
          '(--max-output-mb); output it sent meanwhile may be missing.\n'
      );
      // A reply dropped so is answered as an error, not left unanswered.
      const msgId = client.send('shell', 'execute_request', {
        code: '',
        silent: false,
        user_expressions: { big: "'y' * 30_000_000" }
      });
      const reply = await client.next(
        m => m.header.msg_type === 'execute_reply' && parentOf(m) === msgId
      );
      expect(reply.content).toMatchObject({
        status: 'error',
        ename: 'MessageTooLarge'
      });
      const after = await client.execute("print('still here')");
      expect(after.stdout).toBe('still here\n');
      expect(after.stderr).toBe('');
      await client.close();
    },
    60000
  );

  it('requests sent behind one whose message is dropped each get a reply and an idle status', async () => {
    gw = await startGateway({
      worker: new Worker({
        logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
        maxOutputBytes: 2 ** 20,
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    // As "Run all" sends them: the kernel answers the second while the connection the first lost
    // is not up again, so its reply or output may be lost; it is answered all the same.
    const ends = (msgId: string) =>
      Promise.all([
        client.next(
          m => m.header.msg_type === 'execute_reply' && parentOf(m) === msgId
        ),
        client.next(
          m =>
            m.header.msg_type === 'status' &&
            parentOf(m) === msgId &&
            (m.content as { execution_state?: string }).execution_state ===
              'idle'
        )
      ]);
    for (const big of [
      { code: "print('y' * 5_000_000)" },
      { code: '', user_expressions: { big: "'y' * 5_000_000" } }
    ]) {
      for (let round = 0; round < 5; round++) {
        const first = client.send('shell', 'execute_request', {
          silent: false,
          ...big
        });
        const second = client.send('shell', 'execute_request', {
          code: 'pass',
          silent: false
        });
        const [[firstReply], [secondReply]] = await Promise.all([
          ends(first),
          ends(second)
        ]);
        expect(firstReply.content).toMatchObject(
          big.user_expressions
            ? { status: 'error', ename: 'MessageTooLarge' }
            : { status: 'ok' }
        );
        expect(['ok', 'error']).toContain(
          (secondReply.content as { status: string }).status
        );
      }
    }
    expect((await client.execute("print('still here')")).stdout).toBe(
      'still here\n'
    );
    await client.close();
  }, 120000);

  it('a 300 MB print under an 8 MiB limit never reaches the gateway: its peak memory stays far below', async () => {
    const process = await startGatewayProcess(['--max-output-mb', '8']);
    try {
      const id = await startKernel(process);
      const client = await KernelSocket.connect(process, id);
      const huge = await client.execute("print('x' * 300_000_000)");
      // The gateway process hosts the embedded worker, whose sockets read the kernel's output
      // (116 MiB before the print; 403 MiB when the message was received whole).
      expect(peakRssMib(process.child.pid!)).toBeLessThan(250);
      expect(huge.reply.content).toMatchObject({ status: 'ok' });
      expect(huge.stderr).toMatch(
        /^\[Ferry\] A message from the kernel over 8\.0 MiB was dropped as it arrived/
      );
      expect((await client.execute('print(6 * 7)')).stdout).toBe('42\n');
      await client.close();
    } finally {
      await process.stop();
    }
  }, 120000);

  it('the same print on a remote worker reaches neither the worker nor the gateway', async () => {
    const process = await startGatewayProcess(['--worker-port', '0']);
    const worker = startWorker(
      `127.0.0.1:${process.workerPort}`,
      process.workerToken,
      'output-host',
      ['--max-output-mb', '8', '--simulate', 'gpu:A100:1']
    );
    try {
      await worker.registered();
      const id = await startKernel(process, {
        name: 'python3',
        accelerator: { kind: 'gpu', model: 'A100', count: 1 }
      });
      const client = await KernelSocket.connect(process, id);
      const huge = await client.execute("print('x' * 300_000_000)");
      expect(peakRssMib(worker.child.pid!)).toBeLessThan(250);
      expect(peakRssMib(process.child.pid!)).toBeLessThan(250);
      expect(huge.reply.content).toMatchObject({ status: 'ok' });
      expect(huge.stderr).toMatch(
        /^\[Ferry\] A message from the kernel over 8\.0 MiB was dropped as it arrived/
      );
      expect((await client.execute('print(6 * 7)')).stdout).toBe('42\n');
      await client.close();
    } finally {
      await worker.stop();
      await process.stop();
    }
  }, 120000);

  it('an output over 512 MiB (beyond what a JavaScript string can hold) is a notice under the default limit', async () => {
    gw = await startGateway();
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    const huge = await client.execute(
      "import sys\nsys.stdout.write('y' * 600_000_000)\nsys.stdout.flush()"
    );
    expect(huge.reply.content).toMatchObject({ status: 'ok' });
    expect(huge.stderr).toMatch(
      /^\[Ferry\] A message from the kernel over 128\.0 MiB was dropped as it arrived/
    );
    expect((await client.execute('print(6 * 7)')).stdout).toBe('42\n');
    await client.close();
  }, 120000);
});
