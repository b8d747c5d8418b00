/**
 * Process limits for kernel and terminal code against a real `ferry gateway` process running as
 * root: a real ipykernel and a real bash (both as nobody) try to start hundreds of processes and a
 * `setsid` daemon; at most the limit run, the gateway keeps answering, and a DELETE leaves nothing.
 */
import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createLogger, KernelUser, ProcessLimits, Worker } from '../src';
import {
  isStatus,
  KernelSocket,
  pollUntil,
  startGateway as startInProcessGateway,
  startKernel,
  type ITestGateway
} from './helpers';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { alive, TerminalClient } from './terminal-clients';

/** `--kernel-max-processes` for this gateway: far below what the code below tries to start. */
const LIMIT = 64;
/** Processes each test's code tries to start. */
const TRIES = 400;
/** In the command line of every process the tests start, to find (and kill) them in /proc. */
const MARK = `ferry-limits-${process.pid}-${randomUUID().slice(0, 8)}`;

/** A gateway process of these tests, with a state directory of its own (removed by `stop`). */
async function startGateway(args: string[]): Promise<IGatewayProcess> {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-limits-state-'));
  const gw = await startGatewayProcess([...args, '--state-dir', stateDir]);
  const stop = gw.stop;
  gw.stop = async () => {
    const code = await stop();
    rmSync(stateDir, { recursive: true, force: true });
    return code;
  };
  return gw;
}

/** Live processes whose command line holds `mark`. */
function marked(mark: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) {
      continue;
    }
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      if (cmdline.includes(mark) && alive(Number(name))) {
        found.push(Number(name));
      }
    } catch {
      // Exited meanwhile.
    }
  }
  return found;
}

/** Python that starts a `setsid` daemon (when asked) and then up to TRIES sleeps, catching refusals. */
function spawner(mark: string, daemon: boolean): string {
  return [
    'import subprocess',
    daemon
      ? `subprocess.Popen([${JSON.stringify(`${mark}-daemon`)}, '1000'], executable='sleep', start_new_session=True)`
      : '',
    'started, refused = 0, 0',
    `for i in range(${TRIES}):`,
    '    try:',
    `        subprocess.Popen([${JSON.stringify(mark)}, '60'], executable='sleep')`,
    '        started += 1',
    '    except OSError:',
    '        refused += 1',
    "print(f'started {started} refused {refused}')"
  ].join('\n');
}

// Kernels and terminals run as nobody, in cgroups of their own: both need root.
(process.getuid?.() === 0 ? describe : describe.skip)(
  'process limits of kernels and terminals',
  () => {
    let gw: IGatewayProcess;

    beforeAll(async () => {
      gw = await startGateway(['--kernel-max-processes', String(LIMIT)]);
    });

    afterAll(async () => {
      // Whatever a failed test left behind.
      for (const pid of marked(MARK)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
      await gw?.stop();
    });

    it('says at start-up and in /api/status which limits are in force', async () => {
      const status = await gw.api('GET', '/api/status');
      expect(status.status).toBe(200);
      expect(status.body.process_limits).toMatchObject({
        mode: expect.stringMatching(/^cgroup[12]$/),
        max_processes: LIMIT,
        memory_mb: null,
        kills_setsid_children: true
      });
      expect(gw.stderr()).toContain(
        `each kernel and terminal runs in a cgroup of its own (${status.body.process_limits.mode}`
      );
    });

    it("bounds a kernel's processes, and its DELETE kills them all, setsid ones too", async () => {
      const mark = `${MARK}-kernel`;
      const id = await startKernel(gw);
      const socket = await KernelSocket.connect(gw, id);
      try {
        const run = await socket.execute(spawner(mark, true));
        const [, started, refused] =
          /started (\d+) refused (\d+)/.exec(run.stdout) ?? [];
        expect(Number(started) + Number(refused)).toBe(TRIES);
        expect(Number(refused)).toBeGreaterThan(0);
        expect(marked(mark).length).toBeLessThanOrEqual(LIMIT);
        expect(marked(`${mark}-daemon`)).toHaveLength(1);
        // The gateway answers while its kernel sits at the limit.
        expect((await gw.api('GET', '/api/status')).status).toBe(200);
      } finally {
        await socket.close();
      }
      expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
      expect(marked(mark)).toEqual([]);
    });

    it("bounds a terminal's processes, and its DELETE kills them all, setsid ones too", async () => {
      const mark = `${MARK}-terminal`;
      const script = path.join(gw.rootDir, 'spawn.py');
      writeFileSync(script, spawner(mark, false), { mode: 0o644 });
      const opened = await gw.api('POST', '/api/terminals', {});
      expect(opened.status).toBe(200);
      const name: string = opened.body.name;
      const client = await TerminalClient.connect(gw.url, name, gw.token);
      try {
        client.run(`setsid bash -c 'exec -a ${mark}-daemon sleep 1000' &`);
        await pollUntil(
          async () => marked(`${mark}-daemon`),
          found => found.length === 1,
          20_000,
          50
        );
        const from = client.output.length;
        client.run(`python3 ${script}`);
        const [, started, refused] = await client.waitFor(
          /started (\d+) refused (\d+)/,
          from,
          60_000
        );
        expect(Number(started) + Number(refused)).toBe(TRIES);
        expect(Number(refused)).toBeGreaterThan(0);
        expect(marked(mark).length).toBeLessThanOrEqual(LIMIT);
        expect((await gw.api('GET', '/api/status')).status).toBe(200);
        expect((await gw.api('DELETE', `/api/terminals/${name}`)).status).toBe(
          204
        );
        expect(marked(mark)).toEqual([]);
      } finally {
        client.ws.terminate();
      }
    });
  }
);

// The memory limit needs a cgroup with the memory controller: as root here.
(process.getuid?.() === 0 ? describe : describe.skip)(
  'the memory limit of kernels',
  () => {
    let gw: IGatewayProcess;

    beforeAll(async () => {
      gw = await startGateway(['--kernel-memory-mb', '200']);
    });

    afterAll(async () => {
      await gw?.stop();
    });

    it('kills a kernel past --kernel-memory-mb inside its cgroup; the kernel comes back', async () => {
      const status = await gw.api('GET', '/api/status');
      expect(status.body.process_limits).toMatchObject({ memory_mb: 200 });
      const id = await startKernel(gw);
      const socket = await KernelSocket.connect(gw, id);
      try {
        // 1 GiB, every page touched: the OOM killer of its cgroup takes the kernel, nothing else.
        socket.send('shell', 'execute_request', {
          code: "hog = b'x' * (1024 * 2**20)",
          silent: false,
          store_history: false,
          user_expressions: {},
          allow_stdin: false,
          stop_on_error: true
        });
        await socket.next(m => isStatus(m, 'restarting'), 60_000);
        const run = await socket.execute('print("back")');
        expect(run.stdout).toBe('back\n');
        expect(gw.running()).toBe(true);
      } finally {
        await socket.close();
      }
      expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
    });
  }
);

// Without cgroups (a host that has none, here a mount table without them): RLIMIT_NPROC for a
// kernel user of its own, and a shutdown that reaches its whole session. Switching users needs root.
(process.getuid?.() === 0 ? describe : describe.skip)(
  'kernels on a host without cgroups',
  () => {
    let gw: ITestGateway;
    let rootDir: string;
    let mounts: string;

    beforeAll(async () => {
      rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-limits-root-'));
      chmodSync(rootDir, 0o711);
      mounts = path.join(rootDir, 'mountinfo');
      writeFileSync(mounts, '23 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n');
      const logger = createLogger('silent');
      gw = await startInProcessGateway({
        rootDir,
        worker: new Worker({
          logger,
          kernelUser: KernelUser.resolve('nobody'),
          processLimits: ProcessLimits.detect({
            maxProcesses: 300,
            logger,
            mountinfo: mounts
          }),
          kernelTimings: { shutdownWaitMs: 2000 }
        })
      });
    });

    afterAll(async () => {
      for (const pid of marked(MARK)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
      await gw?.close();
      rmSync(rootDir, { recursive: true, force: true });
    });

    it('puts RLIMIT_NPROC on the kernel and kills its session, other process groups too', async () => {
      expect(gw.worker.processLimits.info).toMatchObject({
        mode: 'rlimit',
        max_processes: 300,
        kills_setsid_children: false
      });
      const mark = `${MARK}-rlimit`;
      const id = await startKernel(gw);
      const pid = gw.worker.kernelPid(id)!;
      const limits = readFileSync(`/proc/${pid}/limits`, 'utf8');
      expect(limits).toMatch(/^Max processes\s+300\s+300\s/m);
      const socket = await KernelSocket.connect(gw, id);
      try {
        // A child in a process group of its own (as a job control shell would make), same session.
        const run = await socket.execute(
          [
            'import os, subprocess',
            `p = subprocess.Popen([${JSON.stringify(mark)}, '600'], executable='sleep', process_group=0)`,
            'print(os.getsid(p.pid) == os.getsid(0), os.getpgid(p.pid) != os.getpgid(0))'
          ].join('\n')
        );
        expect(run.stdout).toBe('True True\n');
        expect(marked(mark)).toHaveLength(1);
      } finally {
        await socket.close();
      }
      expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
      expect(marked(mark)).toEqual([]);
    });
  }
);
