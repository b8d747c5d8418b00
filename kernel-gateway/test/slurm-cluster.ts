import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  promises as fs,
  openSync,
  readFileSync,
  realpathSync,
  rmSync
} from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { jobAccessBlocked, lookUpJobUser } from '../src';

/**
 * A real single-node Slurm cluster for tests: munged, slurmctld and slurmd from the Debian packages,
 * with two fake GPUs (GRES backed by character devices), all under one scratch directory; and
 * slurmrestd on a unix socket when it is installed ({@link SlurmCluster.restUnavailable} says why
 * not). It installs nothing: {@link SlurmCluster.unavailable} says why it cannot run here.
 */
export class SlurmCluster {
  private constructor(readonly dir: string) {}

  /** `SLURM_CONF` and the like, for sbatch, squeue and scancel. */
  get env(): Record<string, string> {
    return { SLURM_CONF: path.join(this.dir, 'slurm.conf') };
  }

  /** Where slurmrestd listens, and the user its jobs run as; undefined without slurmrestd. */
  rest: { url: string; user: string; outputDir: string } | undefined;

  /** A token for slurmrestd's user, as `scontrol token` prints it (`SLURM_JWT=...`). */
  async restToken(): Promise<string> {
    const out = await this.run('scontrol', [
      'token',
      `username=${Private.REST_USER}`,
      'lifespan=7200'
    ]);
    return out.trim();
  }

  /**
   * How the jobs slurmrestd runs start `ferry` as {@link rest}'s user: undefined where that user can
   * run this checkout's (the gateway's default command). A checkout in a directory the user cannot
   * enter (a 0700 home, `mktemp -d`) gets what an operator would do: a copy of Ferry's runtime (its
   * bin, lib and schema, and the production dependencies), hard-linked where the files allow it,
   * under this cluster's directory, with Node beside it when the user cannot run this one.
   */
  async restWorkerCommand(): Promise<string[] | undefined> {
    const user = this.rest && lookUpJobUser(this.rest.user);
    if (!user) {
      return undefined;
    }
    const ferry = path.join(Private.ROOT, 'kernel-gateway', 'bin', 'ferry.js');
    const node = jobAccessBlocked(user, process.execPath, 'run')
      ? await Private.install(
          process.execPath,
          path.join(this.dir, 'node', 'bin', 'node')
        )
      : process.execPath;
    if (!jobAccessBlocked(user, ferry, 'read')) {
      return node === process.execPath ? undefined : [node, ferry];
    }
    const copy = path.join(this.dir, 'ferry');
    for (const [from, to] of Private.runtime()) {
      await Private.install(from, path.join(copy, to));
    }
    return [node, path.join(copy, 'kernel-gateway', 'bin', 'ferry.js')];
  }

  /** The daemons' process ids (munged, slurmctld, slurmd, slurmrestd), read from their pid files. */
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

  /** Why slurmrestd cannot be started here (the CLI tests still can), or undefined when it can. */
  static restUnavailable(): string | undefined {
    if (!Private.which('slurmrestd')) {
      return 'slurmrestd is not installed (scripts/setup.sh test installs slurmrestd slurm-wlm-jwt-plugin)';
    }
    if (!Private.jwtPlugin()) {
      return "Slurm's JWT plugin (auth_jwt.so) is not installed (apt-get install slurm-wlm-jwt-plugin)";
    }
    try {
      execFileSync('id', ['-u', Private.REST_USER], { stdio: 'ignore' });
    } catch {
      return `there is no user ${Private.REST_USER} for slurmrestd and its jobs to run as`;
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
      const jobs = await this.activeJobs().catch(() => []);
      if (jobs.length > 0) {
        await this.run('scancel', jobs).catch(() => undefined);
      }
      await Private.until(
        async () => (await this.activeJobs().catch(() => [])).length === 0,
        30_000
      ).catch(() => undefined);
    }
    // Job steps outlive slurmd, so the jobs go first; then the daemons, munged last.
    for (const name of [
      'slurmrestd',
      'slurmd',
      'slurmctld',
      'munged'
    ] as const) {
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
    const rest = !SlurmCluster.restUnavailable();
    if (rest) {
      // slurmctld checks the tokens slurmrestd passes on with this key (root's alone).
      await fs.writeFile(path.join(d, 'jwt_hs256.key'), randomBytes(32), {
        mode: 0o600
      });
    }
    const [ctldPort, slurmdPort] = [
      await Private.freePort(),
      await Private.freePort()
    ];
    await fs.writeFile(
      path.join(d, 'slurm.conf'),
      Private.slurmConf(d, ctldPort, slurmdPort, rest)
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
    if (rest) {
      await this._startRest(conf);
    }
  }

  /**
   * slurmrestd on a unix socket, as an unprivileged user (it refuses to run as root), passing each
   * client's JWT on to slurmctld (`SLURM_JWT=daemon`); the jobs it submits run as that user.
   */
  private async _startRest(conf: string): Promise<void> {
    const d = this.dir;
    const user = Private.REST_USER;
    const group = execFileSync('id', ['-gn', user], {
      encoding: 'utf8'
    }).trim();
    // It binds the socket after dropping to its user; jobs write their output as that user.
    for (const sub of ['rest', 'jobs']) {
      await fs.mkdir(path.join(d, sub));
      execFileSync('chown', [`${user}:${group}`, path.join(d, sub)]);
    }
    const socket = path.join(d, 'rest', 'slurmrestd.socket');
    const log = openSync(path.join(d, 'log', 'slurmrestd.log'), 'a');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...this.env,
      SLURM_JWT: 'daemon'
    };
    const child = spawn(
      'slurmrestd',
      [
        '-f',
        conf,
        '-u',
        user,
        '-g',
        group,
        '-a',
        'rest_auth/jwt',
        '-s',
        'openapi/v0.0.38',
        `unix:${socket}`
      ],
      { env, stdio: ['ignore', log, log], detached: true }
    );
    closeSync(log);
    child.unref();
    if (child.pid !== undefined) {
      await fs.writeFile(path.join(d, 'slurmrestd.pid'), `${child.pid}\n`);
    }
    const token = (await this.restToken()).replace(/^SLURM_JWT=/, '');
    await Private.until(
      async () => (await Private.ping(socket, user, token)) === 200,
      30_000
    ).catch(() => {
      throw new Error(
        `slurmrestd never answered on ${socket}; its log:\n${Private.tail(path.join(d, 'log', 'slurmrestd.log'))}`
      );
    });
    this.rest = {
      url: `unix:${socket}`,
      user,
      outputDir: path.join(d, 'jobs')
    };
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
  export const DAEMONS = [
    'munged',
    'slurmctld',
    'slurmd',
    'slurmrestd'
  ] as const;

  /** Who slurmrestd and the jobs it submits run as. */
  export const REST_USER = 'nobody';

  /** The root of this checkout. */
  export const ROOT = path.resolve(__dirname, '..', '..');

  /**
   * What `ferry worker` needs at run time, as [source, place in a copy of the checkout]: the
   * gateway package's bin, lib and package.json, the schemas, and every package its dependencies
   * reach (as Node resolves them, each at its real place, with the links npm made to them).
   */
  export function runtime(): [string, string][] {
    const gateway = path.join(ROOT, 'kernel-gateway');
    const entries: [string, string][] = [
      ...['bin', 'lib', 'package.json'].map((name): [string, string] => [
        path.join(gateway, name),
        path.join('kernel-gateway', name)
      ]),
      [path.join(ROOT, 'schema'), 'schema']
    ];
    const seen = new Set<string>([realpathSync(gateway)]);
    const queue = [realpathSync(gateway)];
    while (queue.length > 0) {
      const dir = queue.pop()!;
      const manifest = JSON.parse(
        readFileSync(path.join(dir, 'package.json'), 'utf8')
      );
      const names = Object.keys({
        ...manifest.dependencies,
        ...manifest.optionalDependencies
      });
      for (const name of names) {
        const link = resolvePackage(name, dir);
        if (!link) {
          continue;
        }
        const real = realpathSync(link);
        if (real !== link && !seen.has(link)) {
          // npm's link to a workspace package: the same link in the copy.
          seen.add(link);
          entries.push([link, path.relative(ROOT, link)]);
        }
        if (!seen.has(real)) {
          if (path.relative(ROOT, real).startsWith('..')) {
            throw new Error(
              `${name} lives outside this checkout (${real}): a copy of Ferry's runtime cannot hold it`
            );
          }
          seen.add(real);
          queue.push(real);
          entries.push([real, path.relative(ROOT, real)]);
        }
      }
    }
    return entries;
  }

  /** Make `dir` and what is missing above it, each open to everyone (whatever the umask). */
  async function directory(dir: string): Promise<void> {
    if (existsSync(dir)) {
      return;
    }
    await directory(path.dirname(dir));
    await fs.mkdir(dir);
    await fs.chmod(dir, 0o755);
  }

  /** Where Node finds package `name` from `dir`: the nearest `node_modules/name` above it. */
  function resolvePackage(name: string, dir: string): string | undefined {
    for (let at = dir; ; at = path.dirname(at)) {
      const candidate = path.join(at, 'node_modules', name);
      if (existsSync(path.join(candidate, 'package.json'))) {
        return candidate;
      }
      if (path.dirname(at) === at) {
        return undefined;
      }
    }
  }

  /**
   * Put `from` (a file, a link, or a directory but for its own node_modules) at `to`, readable by
   * everyone: files are hard-linked where everyone may read them already, else copied with read
   * (and, for programs, execute) permission for all.
   *
   * @returns `to`.
   */
  export async function install(from: string, to: string): Promise<string> {
    const stats = await fs.lstat(from);
    await directory(path.dirname(to));
    if (stats.isSymbolicLink()) {
      await fs.symlink(await fs.readlink(from), to);
    } else if (stats.isDirectory()) {
      await directory(to);
      for (const name of await fs.readdir(from)) {
        if (name !== 'node_modules') {
          await install(path.join(from, name), path.join(to, name));
        }
      }
    } else if (
      (stats.mode & 0o004) === 0 ||
      !(await fs.link(from, to).then(
        () => true,
        () => false
      ))
    ) {
      await fs.copyFile(from, to);
      await fs.chmod(
        to,
        (stats.mode & 0o777) | 0o444 | (stats.mode & 0o100 ? 0o111 : 0)
      );
    }
    return to;
  }

  export function jwtPlugin(): boolean {
    return [
      '/usr/lib/x86_64-linux-gnu',
      '/usr/lib/aarch64-linux-gnu',
      '/usr/lib64',
      '/usr/lib'
    ]
      .map(lib => path.join(lib, 'slurm-wlm', 'auth_jwt.so'))
      .concat(['/usr/lib/slurm/auth_jwt.so', '/usr/lib64/slurm/auth_jwt.so'])
      .some(file => existsSync(file));
  }

  /** slurmrestd's answer to a ping, as an HTTP status (0: no answer). */
  export function ping(
    socketPath: string,
    user: string,
    token: string
  ): Promise<number> {
    return new Promise(resolve => {
      const req = request(
        {
          socketPath,
          path: '/slurm/v0.0.38/ping',
          headers: { 'x-slurm-user-name': user, 'x-slurm-user-token': token },
          timeout: 5000
        },
        response => {
          response.resume();
          response.on('end', () => resolve(response.statusCode ?? 0));
        }
      );
      req.on('timeout', () => req.destroy());
      req.on('error', () => resolve(0));
      req.end();
    });
  }

  export function slurmConf(
    d: string,
    ctld: number,
    slurmd: number,
    jwt: boolean
  ): string {
    const auth = jwt
      ? `AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=${d}/jwt_hs256.key\n`
      : '';
    return `ClusterName=ferry
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${ctld}
SlurmdPort=${slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${d}/munge/munge.socket.2
${auth}StateSaveLocation=${d}/state
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
