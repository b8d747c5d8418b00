/**
 * A kernel message too large to relay is replaced by a notice under the cell that printed it, without
 * building a string of it, and the kernel stays usable: a real gateway, a real embedded worker and a
 * real ipykernel, in both framings.
 */
import { createLogger, Worker } from '../src';
import {
  KernelSocket,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';

describe('kernel messages over the output limit', () => {
  let gw: ITestGateway;

  afterEach(async () => {
    await gw?.close();
  });

  it.each(['legacy', 'v1'] as const)(
    'a 3 MB print under a 1 MiB limit becomes a notice, and the kernel runs on (%s)',
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
      const big = await client.execute("print('y' * 3_000_000)");
      expect(big.reply.content).toMatchObject({ status: 'ok' });
      expect(big.stdout).toBe('');
      expect(big.stderr).toMatch(
        /^\[Ferry\] A message of 2\.9 MiB from the kernel was not relayed: messages over 1\.0 MiB are dropped \(--max-output-mb\)\.\n$/
      );
      // A reply over the limit is answered as an error, not left unanswered.
      const msgId = client.send('shell', 'execute_request', {
        code: '',
        silent: false,
        user_expressions: { big: "'y' * 3_000_000" }
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

  it('an output over 512 MiB (beyond what a JavaScript string can hold) is a notice under the default limit', async () => {
    gw = await startGateway();
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    const huge = await client.execute(
      "import sys\nsys.stdout.write('y' * 600_000_000)\nsys.stdout.flush()"
    );
    expect(huge.reply.content).toMatchObject({ status: 'ok' });
    expect(huge.stderr).toMatch(
      /^\[Ferry\] A message of 572\.\d MiB from the kernel was not relayed: messages over 128\.0 MiB are dropped/
    );
    expect((await client.execute('print(6 * 7)')).stdout).toBe('42\n');
    await client.close();
  }, 120000);
});
