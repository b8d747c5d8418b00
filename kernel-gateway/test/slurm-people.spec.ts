/**
 * A signed-in person's kernels on Slurm (`--auth oidc`, a real single-node cluster): the job is
 * submitted as them (sbatch `--uid`/`--gid` from a root gateway; slurmrestd's impersonation with a
 * token of root), so its worker and kernel run as their uid, in their folder, with its output in a
 * folder of theirs; that worker takes their kernels alone, and its token (which their kernel can
 * read) is good for nothing else.
 */
import { execFileSync } from 'node:child_process';
import { promises as fs, realpathSync, statSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  createLogger,
  SlurmProvisioner,
  Worker,
  type IAcceleratorOffer
} from '../src';
import { KernelSocket, pollUntil } from './helpers';
import {
  callAs as call,
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn
} from './oidc-harness';
import { SlurmCluster } from './slurm-cluster';
import { startWorker } from './workers';

jest.setTimeout(180_000);

const OFFERS: IAcceleratorOffer[] = [
  {
    name: 'slurm-gpu',
    accelerator: { kind: 'gpu', model: 'fake', count: 1 },
    slurm: { gres: 'gpu:1', timeLimit: '10' }
  }
];

/** Two people with accounts of this host (and so of the cluster's one node). */
const PEOPLE = ['ferryann', 'ferryben'] as const;

describe('a person’s worker (--owner-uid)', () => {
  it('refuses a kernel of anyone else, and one of the gateway’s owner', async () => {
    const worker = new Worker({
      logger: createLogger('silent'),
      ownerUid: 4242
    });
    try {
      const launch = {
        kernelId: 'k',
        kernelName: 'python3',
        env: {},
        deviceIds: []
      };
      await expect(
        worker.startKernel({
          ...launch,
          runAs: { uid: 4343, gid: 4343, user: 'ben', home: '/tmp' }
        })
      ).rejects.toThrow(
        "this worker runs only the kernels and terminals of uid 4242, whose job it is, not uid 4343's"
      );
      await expect(worker.startKernel(launch)).rejects.toThrow(
        "this worker runs only the kernels and terminals of uid 4242, whose job it is, not the gateway owner's"
      );
    } finally {
      await worker.dispose();
    }
  });
});

const unavailable = SlurmCluster.unavailable();
const describeSlurm = unavailable ? describe.skip : describe;
const restUnavailable = unavailable
  ? undefined
  : SlurmCluster.restUnavailable();
const describeRest = unavailable || restUnavailable ? describe.skip : describe;

/** Run Python in a kernel and return what it printed (throws with its traceback on an error). */
async function run(socket: KernelSocket, code: string): Promise<string> {
  const result = await socket.execute(code);
  const content = result.reply.content as { status: string; evalue?: string };
  if (content.status !== 'ok') {
    throw new Error(`${content.evalue}\n${result.stderr}`);
  }
  return result.stdout.trim();
}

/** What happens when the kernel opens `file` (or lists it): `read` or the error's class. */
function attempt(file: string): string {
  return [
    'import os',
    `p = ${JSON.stringify(file)}`,
    'try:',
    '    os.listdir(p) if os.path.isdir(p) else open(p, "rb").read(1)',
    '    print("read")',
    'except Exception as e:',
    '    print(type(e).__name__)'
  ].join('\n');
}

/**
 * Python that finds the kernel's `ferry worker` among its ancestors and prints the worker token it
 * started with, as any code of the same uid can read it (`/proc/PID/environ`).
 */
const STEAL_TOKEN = [
  'import os',
  'pid = os.getppid()',
  'token = None',
  'while pid > 1 and token is None:',
  '    cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")',
  '    if b"worker" in cmd and b"--once" in cmd:',
  '        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")',
  '        token = next(v[19:].decode() for v in env if v.startswith(b"FERRY_WORKER_TOKEN="))',
  '    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])',
  'print(token)'
].join('\n');

describeSlurm('a signed-in person’s kernels on a real Slurm cluster', () => {
  let cluster: SlurmCluster;
  let profiles: string;
  const uid: Record<string, number> = {};

  beforeAll(async () => {
    for (const name of PEOPLE) {
      try {
        execFileSync('id', ['-u', name], { stdio: 'ignore' });
      } catch {
        execFileSync('useradd', ['-M', '-U', '-s', '/usr/sbin/nologin', name]);
      }
      uid[name] = Number(
        execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim()
      );
    }
    cluster = await SlurmCluster.start();
    profiles = path.join(cluster.dir, 'profiles.json');
    await fs.writeFile(profiles, JSON.stringify({ offers: OFFERS }));
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
    for (const name of PEOPLE) {
      try {
        execFileSync('userdel', [name], { stdio: 'ignore' });
      } catch {
        // made by an earlier run, or already gone
      }
    }
  }, 60_000);

  /** A gateway of people (`--auth oidc`) whose Slurm offer goes through `args`. */
  function gatewayOf(args: () => Promise<string[]>) {
    const it = {
      env: undefined as unknown as IOidcGateway,
      url: '',
      outputDir: '',
      people: {} as Record<string, ISignedIn>,
      /** Start a kernel on the offer as `who` and wait until it runs. */
      async kernel(who: string): Promise<{ id: string; job: string }> {
        const started = await call(
          it.url,
          it.people[who],
          'POST',
          '/api/kernels',
          {
            name: 'python3',
            accelerator: { offer: 'slurm-gpu' }
          }
        );
        expect(started.status).toBe(201);
        const id: string = started.body.id;
        const model = await pollUntil(
          async () =>
            (await call(it.url, it.people[who], 'GET', `/api/kernels/${id}`))
              .body,
          m => m.execution_state === 'idle' || m.execution_state === 'dead',
          90_000,
          250
        );
        expect(model).toMatchObject({ execution_state: 'idle' });
        return { id, job: model.accelerator.job };
      },
      socket(who: string, id: string): Promise<KernelSocket> {
        return KernelSocket.connect({ url: it.url, token: '' }, id, {
          token: null,
          headers: { Cookie: it.people[who].cookie }
        });
      }
    };
    beforeAll(async () => {
      it.outputDir = path.join(cluster.dir, `people-jobs-${Date.now()}`);
      await fs.mkdir(it.outputDir, { mode: 0o755 });
      await fs.chmod(it.outputDir, 0o755);
      it.env = await startOidcGateway({
        args: [
          '--profiles',
          profiles,
          '--worker-port',
          '0',
          '--job-output-dir',
          it.outputDir,
          ...(await args())
        ],
        env: cluster.env
      });
      it.url = it.env.gateway.url;
      for (const name of PEOPLE) {
        it.people[name] = await signIn(it.url, name);
      }
    }, 90_000);
    afterAll(async () => {
      await it.env?.stop();
      await pollUntil(
        () => cluster.activeJobs(),
        jobs => jobs.length === 0,
        60_000,
        250
      ).catch(() => undefined);
    }, 90_000);
    return it;
  }

  describe('through sbatch (--uid, --gid)', () => {
    const gw = gatewayOf(async () => []);
    let ann: { id: string; job: string };
    let annSocket: KernelSocket;

    it('runs a person’s kernel in a job submitted as them: their uid, their folder, their log folder', async () => {
      const saved = await call(
        gw.url,
        gw.people.ferryann,
        'PUT',
        '/api/contents/mine.txt',
        { type: 'file', format: 'text', content: 'ann wrote this' }
      );
      expect(saved.status).toBe(201);
      ann = await gw.kernel('ferryann');
      expect(
        (await cluster.run('squeue', ['-h', '-j', ann.job, '-o', '%u'])).trim()
      ).toBe('ferryann');
      annSocket = await gw.socket('ferryann', ann.id);
      const [id, cwd, text, token] = (
        await run(
          annSocket,
          "import os; print(os.getuid(), os.getcwd(), open('mine.txt').read().replace(' ', '_'), os.environ.get('FERRY_WORKER_TOKEN'))"
        )
      ).split(' ');
      expect(Number(id)).toBe(uid.ferryann);
      expect(cwd).toBe(realpathSync(path.join(gw.env.userRoot, 'ferryann')));
      expect(text).toBe('ann_wrote_this');
      expect(token).toBe('None');
      // Its output goes to a folder of hers that no one else may enter.
      const logs = path.join(gw.outputDir, 'ferryann');
      const folder = statSync(logs);
      expect([folder.uid, folder.mode & 0o777]).toEqual([uid.ferryann, 0o700]);
      expect(statSync(path.join(logs, `ferry-job-${ann.job}.log`)).uid).toBe(
        uid.ferryann
      );
    }, 120_000);

    it('keeps another person’s kernel out of her folder and her job’s log', async () => {
      const ben = await gw.kernel('ferryben');
      expect(
        (await cluster.run('squeue', ['-h', '-j', ben.job, '-o', '%u'])).trim()
      ).toBe('ferryben');
      const socket = await gw.socket('ferryben', ben.id);
      try {
        expect(Number(await run(socket, 'import os; print(os.getuid())'))).toBe(
          uid.ferryben
        );
        for (const file of [
          path.join(gw.env.userRoot, 'ferryann', 'mine.txt'),
          path.join(gw.outputDir, 'ferryann'),
          path.join(gw.outputDir, 'ferryann', `ferry-job-${ann.job}.log`)
        ]) {
          expect(await run(socket, attempt(file))).toBe('PermissionError');
        }
      } finally {
        socket.close();
      }
      expect(
        (
          await call(
            gw.url,
            gw.people.ferryben,
            'DELETE',
            `/api/kernels/${ben.id}`
          )
        ).status
      ).toBe(204);
    }, 120_000);

    it('gives her worker a token that registers no other worker and no other person', async () => {
      const stolen = await run(annSocket, STEAL_TOKEN);
      expect(stolen).toMatch(/^ferry-job\./);
      expect(stolen).not.toBe(gw.env.gateway.workerToken);
      const gateway = `127.0.0.1:${gw.env.gateway.workerPort}`;
      for (const args of [
        // A worker of its own, to take others' kernels.
        ['--id', 'static-thief', '--simulate', 'gpu:fake:1'],
        // Her job's worker id, claiming to be another person's.
        [
          '--id',
          `job-${ann.id}`,
          '--owner-uid',
          String(uid.ferryben),
          '--simulate',
          'gpu:fake:1'
        ]
      ]) {
        const thief = startWorker(gateway, stolen, 'thief', args, null);
        try {
          expect(await thief.exited).toBe(2);
          expect(thief.logs()).toContain(
            "a job's token registers only its own worker, for its own person"
          );
        } finally {
          await thief.stop();
        }
      }
      // Her kernel still runs, on her worker.
      expect(await run(annSocket, 'print(6 * 7)')).toBe('42');
    }, 120_000);

    it('cancels her job when her kernel is deleted', async () => {
      annSocket.close();
      expect(
        (
          await call(
            gw.url,
            gw.people.ferryann,
            'DELETE',
            `/api/kernels/${ann.id}`
          )
        ).status
      ).toBe(204);
      await pollUntil(
        () => cluster.activeJobs(),
        jobs => !jobs.includes(ann.job),
        60_000,
        250
      );
    }, 90_000);
  });

  describe('for a person the cluster has no account for (a --user-uids uid)', () => {
    const gw = gatewayOf(async () => []);

    it('runs their kernel in a root job whose worker switches to their uid', async () => {
      gw.people.ferrycal = await signIn(gw.url, 'ferrycal');
      const cal = statSync(path.join(gw.env.userRoot, 'ferrycal')).uid;
      expect(cal).toBeGreaterThanOrEqual(61000);
      const kernel = await gw.kernel('ferrycal');
      expect(
        (
          await cluster.run('squeue', ['-h', '-j', kernel.job, '-o', '%u'])
        ).trim()
      ).toBe('root');
      const socket = await gw.socket('ferrycal', kernel.id);
      try {
        expect(Number(await run(socket, 'import os; print(os.getuid())'))).toBe(
          cal
        );
      } finally {
        socket.close();
      }
      expect(
        (
          await call(
            gw.url,
            gw.people.ferrycal,
            'DELETE',
            `/api/kernels/${kernel.id}`
          )
        ).status
      ).toBe(204);
    }, 150_000);
  });

  describeRest('through slurmrestd (impersonation)', () => {
    const gw = gatewayOf(async () => {
      // Root's token: slurmctld lets SlurmUser and root submit as another user.
      const tokenFile = path.join(cluster.dir, 'root.token');
      const token = await cluster.run('scontrol', [
        'token',
        'username=root',
        'lifespan=7200'
      ]);
      await fs.writeFile(tokenFile, token, { mode: 0o600 });
      return [
        '--slurm-rest-url',
        cluster.rest!.url,
        '--slurm-jwt-file',
        tokenFile
      ];
    });

    it('submits a person’s job as them, and their kernel runs as their uid', async () => {
      const ann = await gw.kernel('ferryann');
      expect(
        (await cluster.run('squeue', ['-h', '-j', ann.job, '-o', '%u'])).trim()
      ).toBe('ferryann');
      const socket = await gw.socket('ferryann', ann.id);
      try {
        expect(
          (
            await run(
              socket,
              'import os; print(os.getuid(), os.environ["HOME"])'
            )
          ).split(' ')
        ).toEqual([
          String(uid.ferryann),
          path.join(gw.env.userRoot, 'ferryann')
        ]);
      } finally {
        socket.close();
      }
      expect(
        (
          await call(
            gw.url,
            gw.people.ferryann,
            'DELETE',
            `/api/kernels/${ann.id}`
          )
        ).status
      ).toBe(204);
      // Cancelled as her, through slurmrestd.
      await pollUntil(
        () => cluster.activeJobs(),
        jobs => !jobs.includes(ann.job),
        60_000,
        250
      );
    }, 150_000);

    it('says why when the token is not one that may submit as another user', async () => {
      const provisioner = new SlurmProvisioner({
        gateway: () => '127.0.0.1:1',
        token: 'worker-token',
        workerCommand: ['/bin/true'],
        logger: createLogger('silent'),
        rest: { url: cluster.rest!.url, token: await cluster.restToken() }
      });
      try {
        await expect(
          provisioner.provision('k', OFFERS[0], undefined, {
            uid: uid.ferryann,
            gid: uid.ferryann,
            user: 'ferryann',
            home: os.tmpdir()
          })
        ).rejects.toThrow(
          `refused the job as ferryann (submitting as another user needs a token of SlurmUser or root, and this one is ${cluster.rest!.user}'s)`
        );
      } finally {
        provisioner.dispose();
      }
    }, 60_000);
  });
});
