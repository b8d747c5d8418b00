import { execFile, execFileSync } from 'node:child_process';
import { existsSync, promises as fs, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * A real single-node Slurm cluster for tests: munged, slurmctld and slurmd from the Debian packages,
 * with two fake GPUs (GRES backed by character devices), all under one scratch directory. It installs
 * nothing: {@link SlurmCluster.unavailable} says why it cannot run here.
 */
export class SlurmCluster {
  private constructor(readonly dir: string) {}

  /** `SLURM_CONF` and the like, for sbatch, squeue and scancel. */
  get env(): Record<string, string> {
    return { SLURM_CONF: path.join(this.dir, 'slurm.conf') };
  }

  /** The daemons' process ids (munged, slurmctld, slurmd), read from their pid files. */
  pids(): number[] {
    return Private.DAEMONS.map(name => this._pid(name)).filter(
      (pid): pid is number => pid !== undefined
    );
  }

  /** Why a cluster cannot be started on this machine, or undefined when it can. */
  static unavailable(): string | undefined {
    if (process.platform !== 'linux') {
      return 'Slurm runs on Linux only';
    }
    if (process.getuid?.() !== 0) {
      return 'starting slurmctld/slurmd and mknod need root';
    }
    for (const tool of [
      'munged',
      'mungekey',
      'slurmctld',
      'slurmd',
      'sbatch',
      'squeue',
      'scancel',
      'sinfo',
      'runuser'
    ]) {
      if (!Private.which(tool)) {
        return `${tool} is not installed (scripts/setup.sh test installs slurm-wlm slurmctld slurmd slurm-client munge)`;
      }
    }
    try {
      execFileSync('id', ['-u', 'munge'], { stdio: 'ignore' });
    } catch {
      return 'there is no munge user for munged to run as';
    }
    // Containers without CAP_MKNOD cannot make the character devices that back the fake GPUs.
    const probe = path.join(os.tmpdir(), `ferry-mknod-probe-${process.pid}`);
    try {
      execFileSync('mknod', [probe, 'c', '195', '0'], { stdio: 'ignore' });
    } catch {
      return 'mknod is not permitted here (no CAP_MKNOD), so no GRES device can back the fake GPUs';
    } finally {
      try {
        rmSync(probe, { force: true });
      } catch {
        // nothing to remove
      }
    }
    return undefined;
  }

  /** Start munged, slurmctld and slurmd and wait until the node is idle. */
  static async start(): Promise<SlurmCluster> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-slurm-'));
    const cluster = new SlurmCluster(dir);
    try {
      await cluster._start();
    } catch (error) {
      await cluster.stop().catch(() => undefined);
      throw error;
    }
    return cluster;
  }

  /** Run a Slurm command against this cluster and resolve with its stdout. */
  run(command: string, args: string[]): Promise<string> {
    return new Promise((resolve, reject) =>
      execFile(
        command,
        args,
        { env: { ...process.env, ...this.env }, timeout: 20_000 },
        (error, stdout, stderr) =>
          error
            ? reject(new Error(`${command}: ${stderr.trim() || error.message}`))
            : resolve(stdout)
      )
    );
  }

  /** The ids of the jobs squeue lists as pending, running or completing. */
  async activeJobs(): Promise<string[]> {
    const out = await this.run('squeue', ['-h', '-o', '%i']);
    return out.split('\n').filter(Boolean);
  }

  /** A job's state with its reason, as squeue writes it (`PENDING|Resources`). */
  async jobState(id: string): Promise<string> {
    const out = await this.run('squeue', [
      '-h',
      '-t',
      'all',
      '-j',
      id,
      '-o',
      '%T|%r'
    ]);
    return out.trim();
  }

  /** Cancel every job, wait for an empty queue, then stop each daemon by its pid file. */
  async stop(): Promise<void> {
    if (this._stopped) {
      return;
    }
    this._stopped = true;
    if (this._pid('slurmctld') !== undefined) {
      await this.run('scancel', ['-u', 'root']).catch(() => undefined);
      await Private.until(
        async () => (await this.activeJobs().catch(() => [])).length === 0,
        30_000
      ).catch(() => undefined);
    }
    // Job steps outlive slurmd, so the jobs go first; then the daemons, munged last.
    for (const name of ['slurmd', 'slurmctld', 'munged'] as const) {
      const pid = this._pid(name);
      if (pid === undefined) {
        continue;
      }
      Private.signal(pid, 'SIGTERM');
      const gone = await Private.until(
        async () => !Private.alive(pid),
        15_000
      ).then(
        () => true,
        () => false
      );
      if (!gone) {
        Private.signal(pid, 'SIGKILL');
      }
    }
    if (!process.env.FERRY_KEEP_SLURM_DIR) {
      await fs.rm(this.dir, { recursive: true, force: true });
    }
  }

  private async _start(): Promise<void> {
    const d = this.dir;
    await fs.chmod(d, 0o755);
    for (const sub of ['munge', 'state', 'spool', 'log', 'dev']) {
      await fs.mkdir(path.join(d, sub), { recursive: true });
    }
    const [ctldPort, slurmdPort] = [
      await Private.freePort(),
      await Private.freePort()
    ];
    await fs.writeFile(
      path.join(d, 'slurm.conf'),
      Private.slurmConf(d, ctldPort, slurmdPort)
    );
    await fs.writeFile(
      path.join(d, 'gres.conf'),
      `NodeName=node0 Name=gpu Type=fake File=${d}/dev/nvidia[0-1] Flags=nvidia_gpu_env\n`
    );
    // GRES needs character devices (regular files give no CUDA_VISIBLE_DEVICES); no driver needed.
    for (const n of [0, 1]) {
      execFileSync('mknod', [
        path.join(d, 'dev', `nvidia${n}`),
        'c',
        '195',
        String(n)
      ]);
    }
    const munge = path.join(d, 'munge');
    const key = path.join(munge, 'munge.key');
    execFileSync('mungekey', ['--create', `--keyfile=${key}`]);
    execFileSync('chown', ['-R', 'munge:', munge]);
    await fs.chmod(munge, 0o755);
    await fs.chmod(key, 0o600);
    execFileSync('runuser', [
      '-u',
      'munge',
      '--',
      'munged',
      `--key-file=${key}`,
      `--socket=${munge}/munge.socket.2`,
      `--pid-file=${munge}/munged.pid`,
      `--log-file=${munge}/munged.log`,
      `--seed-file=${munge}/munged.seed`
    ]);
    const env = { ...process.env, ...this.env };
    delete env.SLURM_JWT;
    const conf = path.join(d, 'slurm.conf');
    execFileSync('slurmctld', ['-f', conf], { env });
    execFileSync('slurmd', ['-f', conf, '-N', 'node0'], { env });
    await Private.until(async () => {
      const state = await this.run('sinfo', ['-h', '-o', '%T']).catch(() => '');
      return state.trim() === 'idle';
    }, 30_000).catch(() => {
      throw new Error(
        `the Slurm node never became idle; slurmd log:\n${Private.tail(path.join(d, 'log', 'slurmd.log'))}\nslurmctld log:\n${Private.tail(path.join(d, 'log', 'slurmctld.log'))}`
      );
    });
  }

  private _pid(name: (typeof Private.DAEMONS)[number]): number | undefined {
    const file =
      name === 'munged'
        ? path.join(this.dir, 'munge', 'munged.pid')
        : path.join(this.dir, `${name}.pid`);
    try {
      const pid = Number(readFileSync(file, 'utf8').trim());
      return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  private _stopped = false;
}

namespace Private {
  export const DAEMONS = ['munged', 'slurmctld', 'slurmd'] as const;

  export function slurmConf(d: string, ctld: number, slurmd: number): string {
    return `ClusterName=ferry
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${ctld}
SlurmdPort=${slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${d}/munge/munge.socket.2
StateSaveLocation=${d}/state
SlurmdSpoolDir=${d}/spool
SlurmctldPidFile=${d}/slurmctld.pid
SlurmdPidFile=${d}/slurmd.pid
SlurmctldLogFile=${d}/log/slurmctld.log
SlurmdLogFile=${d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
GresTypes=gpu
NodeName=node0 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=4000 Gres=gpu:fake:2 State=UNKNOWN
PartitionName=debug Nodes=node0 Default=YES MaxTime=INFINITE State=UP
`;
  }

  export function which(tool: string): boolean {
    const dirs = (process.env.PATH ?? '')
      .split(':')
      .concat(['/usr/sbin', '/sbin', '/usr/bin']);
    return dirs.some(dir => existsSync(path.join(dir, tool)));
  }

  export function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const port = (server.address() as { port: number }).port;
        server.close(() => resolve(port));
      });
    });
  }

  /** Poll a condition (a bounded loop: the daemons offer nothing to wait on). */
  export async function until(
    condition: () => Promise<boolean>,
    timeoutMs: number
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await condition())) {
      if (Date.now() > deadline) {
        throw new Error('timed out');
      }
      await new Promise(resolve => setTimeout(resolve, 200));
    }
  }

  export function alive(pid: number): boolean {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  export function signal(pid: number, name: NodeJS.Signals): void {
    try {
      process.kill(pid, name);
    } catch {
      // already gone
    }
  }

  export function tail(file: string): string {
    try {
      return readFileSync(file, 'utf8').split('\n').slice(-15).join('\n');
    } catch {
      return '(none)';
    }
  }
}
