/**
 * A remote worker killed with -9 and started again (the same identity) within its grace period
 * registers without the kernels of its old process: the gateway takes its report as the truth, so
 * those kernels are dead with a reason and their devices free. A real `ferry gateway` process with a
 * worker port, real `ferry worker` processes and real ipykernels.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { expectSchema, KernelSocket, startKernel } from './helpers';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { startWorker, type IWorkerProcess } from './workers';

/** The processes whose parent is `pid` (a worker's kernels: each leads a process group). */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter(name => /^\d+$/.test(name))
    .filter(name => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        // The parent's pid is the second field after the command, which is in parentheses.
        return (
          Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('a remote worker that comes back after kill -9 within its grace period', () => {
  let gw: IGatewayProcess;
  const workers: IWorkerProcess[] = [];

  beforeAll(async () => {
    // Devices held from each kernel's start, as this test's queued kernel needs.
    gw = await startGatewayProcess([
      '--worker-port',
      '0',
      '--worker-grace',
      '300',
      '--hold-devices',
      'always'
    ]);
  });

  afterAll(async () => {
    await Promise.all(workers.map(w => w.stop()));
    await gw?.stop();
  });

  /** A kernel's REST model, checked against the contract. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function kernelModel(id: string): Promise<any> {
    const response = await gw.api('GET', `/api/kernels/${id}`);
    expect(response.status).toBe(200);
    expectSchema('Kernel', response.body);
    return response.body;
  }

  /** Start the worker `gpu-host` with one simulated A100, and wait until it registered. */
  async function startGpuWorker(): Promise<IWorkerProcess> {
    const worker = startWorker(
      `127.0.0.1:${gw.workerPort}`,
      gw.workerToken,
      'gpu-host',
      ['--simulate', 'gpu:A100:1']
    );
    workers.push(worker);
    await worker.registered();
    return worker;
  }

  it('leaves the kernels of its old process dead, with a reason, and their device to a queued kernel', async () => {
    const accelerator = { kind: 'gpu', model: 'A100', count: 1 };
    const first = await startGpuWorker();
    const old = await startKernel(gw, { name: 'python3', accelerator });
    const client = await KernelSocket.connect(gw, old);
    expect((await client.execute('print(6 * 7)')).stdout).toBe('42\n');

    // The worker dies at once, and its kernels with it (as on a host that reboots).
    const kernels = childrenOf(first.child.pid!);
    expect(kernels.length).toBeGreaterThan(0);
    const seen = client.received.length;
    first.child.kill('SIGKILL');
    await first.exited;
    for (const pid of kernels) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }

    // A kernel asking for the same device meanwhile waits: the old kernel holds it.
    const next = await startKernel(gw, { name: 'python3', accelerator });
    expect((await kernelModel(next)).accelerator).toMatchObject({
      state: 'queued'
    });

    // A new process of the same worker, well within the grace period.
    await startGpuWorker();
    const model = await kernelModel(old);
    expect(model.execution_state).toBe('dead');
    expect(model.reason).toMatch(
      /worker gpu-host registered again without it: the worker restarted and no longer runs it/
    );
    // Its client is told, as for any kernel that died (after `unknown` while the worker was away),
    // and never that it is idle or busy again.
    await client.next(
      m =>
        m.header.msg_type === 'status' &&
        (m.content as { execution_state?: string }).execution_state === 'dead'
    );
    const states = client.received
      .slice(seen)
      .filter(m => m.header.msg_type === 'status')
      .map(m => (m.content as { execution_state: string }).execution_state)
      .filter(state => state !== 'unknown');
    expect(states).toEqual(['dead']);
    await client.close();

    // Its device is free: the kernel that waited for it runs there now.
    const again = await KernelSocket.connect(gw, next);
    expect((await again.execute('print(6 * 8)')).stdout).toBe('48\n');
    const started = await kernelModel(next);
    expect(started.execution_state).toBe('idle');
    expect(started.accelerator).toMatchObject({ state: 'assigned' });
    await again.close();
  }, 120000);
});
