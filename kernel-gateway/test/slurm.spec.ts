import { createHmac, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  checkProfiles,
  createLogger,
  loadProfiles,
  lookUpJobUser,
  ProfilesError,
  SlurmProvisioner,
  Worker,
  type IAcceleratorOffer,
  type IProvisionedJob,
  type JobState
} from '../src';
import {
  KernelSocket,
  kernelModel,
  pollUntil,
  processAlive,
  startGateway,
  type ITestGateway,
  expectSchema
} from './helpers';
import { JobsClient, type JobClientEvent } from '../src/cli/jobs-client';
import { codeCell, notebook } from './notebooks';
import { SlurmCluster } from './slurm-cluster';
import { startWorker } from './workers';

const WORKER_TOKEN = 'worker-token-for-slurm-tests';

const OFFERS: IAcceleratorOffer[] = [
  {
    name: 'slurm-gpu',
    displayName: 'GPU on Slurm',
    accelerator: { kind: 'gpu', model: 'fake', count: 1 },
    slurm: { gres: 'gpu:1', timeLimit: '10' }
  }
];

describe('accelerator profiles', () => {
  it('accepts a profiles file in YAML', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-profiles-'));
    const file = path.join(dir, 'profiles.yaml');
    await fs.writeFile(
      file,
      [
        'offers:',
        '  - name: a100',
        '    displayName: A100 on the cluster',
        '    accelerator: { kind: gpu, model: A100, count: 1 }',
        '    slurm: { partition: gpu, gres: "gpu:a100:1", timeLimit: "1:00:00", extraArgs: [--qos=interactive] }'
      ].join('\n')
    );
    expect(loadProfiles(file)).toEqual([
      {
        name: 'a100',
        displayName: 'A100 on the cluster',
        accelerator: { kind: 'gpu', model: 'A100', count: 1 },
        slurm: {
          partition: 'gpu',
          gres: 'gpu:a100:1',
          timeLimit: '1:00:00',
          extraArgs: ['--qos=interactive']
        }
      }
    ]);
    await fs.rm(dir, { recursive: true });
  });

  it('names the bad field of a bad file', () => {
    const bad = (offer: Record<string, unknown>) => () =>
      checkProfiles({ offers: [offer] }, 'p.yaml');
    const base = {
      name: 'x',
      accelerator: { kind: 'gpu', count: 1 },
      slurm: { gres: 'gpu:1' }
    };
    expect(bad({ ...base, accelerator: { kind: 'gpu', count: 0 } })).toThrow(
      'bad p.yaml: offers.0.accelerator.count: must be >= 1'
    );
    expect(bad({ ...base, slurm: { gres: 'gpu:1', partiton: 'x' } })).toThrow(
      "offers.0.slurm: unknown field 'partiton'"
    );
    expect(bad({ ...base, slurm: { gres: 'gpu:1; rm -rf /' } })).toThrow(
      'offers.0.slurm.gres: must match pattern'
    );
    expect(bad({ name: 'x', accelerator: { kind: 'gpu', count: 1 } })).toThrow(
      'exactly one engine'
    );
    expect(() => checkProfiles({ offers: [base, base] }, 'p.yaml')).toThrow(
      "offers.1.name: 'x' is offered twice"
    );
    expect(() => loadProfiles('/nonexistent/profiles.yaml')).toThrow(
      ProfilesError
    );
  });
});

describe('SlurmProvisioner against stand-in Slurm commands', () => {
  let dir: string;
  let provisioner: SlurmProvisioner;

  /** Write a stand-in for a Slurm command: it logs its arguments and answers from a file. */
  async function standIn(name: string, body: string): Promise<string> {
    const file = path.join(dir, name);
    await fs.writeFile(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    return file;
  }

  /** What the stand-in squeue prints next (replaced at once: it never sees a half-written file). */
  async function answer(text: string): Promise<void> {
    await fs.writeFile(path.join(dir, 'squeue.next'), text);
    await fs.rename(
      path.join(dir, 'squeue.next'),
      path.join(dir, 'squeue.out')
    );
  }

  function next(job: IProvisionedJob): Promise<JobState> {
    return new Promise(resolve => job.once('changed', resolve));
  }

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-slurm-stand-in-'));
    await fs.writeFile(path.join(dir, 'next-id'), '42');
    provisioner = new SlurmProvisioner({
      gateway: () => 'gw.example:8889',
      token: 'secret-worker-token',
      workerCommand: ['/opt/ferry/bin/ferry'],
      logger: createLogger('silent'),
      pollIntervalMs: 50,
      bin: {
        sbatch: await standIn(
          'sbatch',
          `echo "$@" >> ${dir}/sbatch.args; cat > ${dir}/script.$(cat ${dir}/next-id); ` +
            `echo "$FERRY_WORKER_TOKEN" > ${dir}/token; id=$(cat ${dir}/next-id); ` +
            `echo $((id + 1)) > ${dir}/next-id; echo "$id;cluster"`
        ),
        squeue: await standIn(
          'squeue',
          `echo "$@" >> ${dir}/squeue.args; cat ${dir}/squeue.out`
        ),
        scancel: await standIn('scancel', `echo "$@" >> ${dir}/scancel.args`)
      }
    });
  });

  afterAll(async () => {
    provisioner.dispose();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('submits with the offer, keeps the token off command lines, and follows the job with one squeue for all', async () => {
    await answer('');
    const offer: IAcceleratorOffer = {
      name: 'a100',
      accelerator: { kind: 'gpu', model: 'A100', count: 1 },
      slurm: {
        partition: 'gpu',
        gres: 'gpu:a100:1',
        timeLimit: '1:00:00',
        account: 'lab',
        extraArgs: ['--qos=interactive']
      }
    };
    await answer('42|PENDING|Priority|1:00:00\n43|PENDING|Resources|1:00:00\n');
    const job = await provisioner.provision('k1', offer);
    const other = await provisioner.provision('k2', offer);
    expect([job.id, other.id]).toEqual(['42', '43']);
    expect(job.workerId).toBe('job-k1');
    const args = await fs.readFile(path.join(dir, 'sbatch.args'), 'utf8');
    expect(args.split('\n')[0].split(' ')).toEqual(
      expect.arrayContaining([
        '--parsable',
        '--gres=gpu:a100:1',
        '--partition=gpu',
        '--time=1:00:00',
        '--account=lab',
        '--qos=interactive'
      ])
    );
    const script = await fs.readFile(path.join(dir, 'script.42'), 'utf8');
    expect(script).toContain('/opt/ferry/bin/ferry worker --once --id job-k1');
    expect(script).toContain('--gateway gw.example:8889');
    expect(script).toContain('--allocated gpu:A100');
    expect(args + script).not.toContain('secret-worker-token');
    expect((await fs.readFile(path.join(dir, 'token'), 'utf8')).trim()).toBe(
      'secret-worker-token'
    );

    /** The job's state once `done` holds for it. */
    const once = (which: IProvisionedJob, done: (state: JobState) => boolean) =>
      new Promise<JobState>(resolve => {
        const check = () =>
          done(which.state)
            ? resolve(which.state)
            : which.once('changed', check);
        check();
      });
    const reasonIs = (reason: string) => (state: JobState) =>
      state.state === 'pending' && state.reason === reason;
    expect(await once(job, reasonIs('Priority'))).toEqual({
      state: 'pending',
      reason: 'Priority'
    });
    await once(other, reasonIs('Resources'));
    expect(job.timeLimit).toBe('1:00:00');

    let changed = next(job);
    await answer('42|RUNNING|None|1:00:00\n43|PENDING|Resources|1:00:00\n');
    expect(await changed).toEqual({ state: 'running' });
    // One squeue call asks about every job.
    const polls = await fs.readFile(path.join(dir, 'squeue.args'), 'utf8');
    expect(polls).toContain('-j 42,43 ');
    changed = next(job);
    await answer(
      '42|TIMEOUT|TimeLimit|1:00:00\n43|PENDING|Resources|1:00:00\n'
    );
    expect(await changed).toEqual({
      state: 'ended',
      reason: 'Slurm job 42 reached its time limit (time limit 1:00:00)',
      completed: false
    });

    changed = next(other);
    await other.cancel();
    expect(
      (await fs.readFile(path.join(dir, 'scancel.args'), 'utf8')).trim()
    ).toBe('43');
    await answer('43|CANCELLED|None|1:00:00\n');
    expect(await changed).toEqual({
      state: 'ended',
      reason: 'Slurm job 43 was cancelled',
      completed: false
    });
  });
});

/** The user slurmrestd runs jobs as in these tests, where this host has it and it is not ours. */
const JOB_USER = lookUpJobUser('nobody');
const describeJobUser =
  JOB_USER && JOB_USER.uid !== process.getuid?.() ? describe : describe.skip;

describeJobUser(
  'SlurmProvisioner through slurmrestd, for a job user who cannot reach Ferry',
  () => {
    // A checkout of Ferry in a directory only its owner may enter (a 0700 home, `mktemp -d`).
    let closed: string;
    let ferry: string;

    function provisioner(extra: Partial<SlurmProvisioner.IOptions> = {}) {
      return new SlurmProvisioner({
        gateway: () => '127.0.0.1:1',
        token: WORKER_TOKEN,
        workerCommand: ['/usr/bin/env', 'node', ferry],
        logger: createLogger('silent'),
        // Nothing listens there: nothing is submitted before the check.
        rest: {
          url: 'unix:/nonexistent/slurmrestd.socket',
          token: Private.foreignToken(JOB_USER!.name)
        },
        ...extra
      });
    }

    /** How `ls -l` would show `dir`, as the message says it. */
    async function listed(dir: string): Promise<string> {
      const stats = await fs.stat(dir);
      return `${dir} is drwx------ (owner uid ${stats.uid}, group ${stats.gid})`;
    }

    beforeAll(async () => {
      closed = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-closed-'));
      await fs.chmod(closed, 0o700);
      await fs.mkdir(path.join(closed, 'ferry', 'kernel-gateway', 'bin'), {
        recursive: true
      });
      ferry = path.join(closed, 'ferry', 'kernel-gateway', 'bin', 'ferry.js');
      await fs.writeFile(ferry, '', { mode: 0o644 });
    });

    afterAll(async () => {
      await fs.rm(closed, { recursive: true, force: true });
    });

    it('stops start-up with who cannot reach what, and what to do', async () => {
      expect(() => provisioner()).toThrow(
        `Slurm jobs submitted through slurmrestd run as ${JOB_USER!.name}, who cannot read the worker command's ${ferry} (${await listed(closed)}): ` +
          `install Ferry where ${JOB_USER!.name} can read it (for example under /opt/ferry) and give the jobs that copy with --job-worker-command (for example '/usr/bin/node /opt/ferry/kernel-gateway/bin/ferry.js'); ` +
          `or let ${JOB_USER!.name} through the closed directory (chmod o+x on it)`
      );
      expect(() =>
        provisioner({ workerCommand: ['/bin/true'], outputDir: closed })
      ).toThrow(
        `Slurm jobs submitted through slurmrestd run as ${JOB_USER!.name}, who cannot write its output into ${closed} (${await listed(closed)}): ` +
          `give --job-output-dir a directory that ${JOB_USER!.name} can write`
      );
      // Its kernels start in the gateway's root directory, as that user.
      expect(() =>
        provisioner({ workerCommand: ['/bin/true'], rootDir: closed })
      ).toThrow(
        `Slurm jobs submitted through slurmrestd run as ${JOB_USER!.name}, who cannot enter ${closed}, where its kernel starts (${await listed(closed)}): ` +
          `give --root-dir a directory that ${JOB_USER!.name} can enter, or let it through the closed directory`
      );
    });

    it('starts once the user can reach the worker, and submits no job once it cannot, saying why', async () => {
      await fs.chmod(closed, 0o711);
      const reachable = provisioner();
      try {
        await fs.chmod(closed, 0o700);
        const reason = `Slurm jobs submitted through slurmrestd run as ${JOB_USER!.name}, who cannot read the worker command's ${ferry} (${await listed(closed)})`;
        await expect(reachable.provision('k', OFFERS[0])).rejects.toThrow(
          reason
        );
      } finally {
        reachable.dispose();
      }
    });
  }
);

describe('ferry worker --once', () => {
  it('exits 0 once the kernel it ran is shut down', async () => {
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    // A worker started as root runs its kernels as nobody: a root directory nobody can enter,
    // wherever this checkout is.
    const rootDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-once-'));
    await fs.chmod(rootDir, 0o755);
    const gw = await startGateway({
      worker: new Worker({ logger, kernelTimings: { shutdownWaitMs: 2000 } }),
      workerPort: 0,
      workerToken: WORKER_TOKEN,
      rootDir
    });
    const worker = startWorker(
      `127.0.0.1:${gw.gateway.workerPort}`,
      WORKER_TOKEN,
      'once',
      ['--once', '--no-cpu', '--simulate', 'gpu:H100:1']
    );
    try {
      await worker.registered();
      const started = await gw.api('POST', '/api/kernels', {
        name: 'python3',
        accelerator: { kind: 'gpu', count: 1 }
      });
      expect(started.body.accelerator.workerName).toBe('once');
      expect(
        (await gw.api('DELETE', `/api/kernels/${started.body.id}`)).status
      ).toBe(204);
      expect(await worker.exited).toBe(0);
    } finally {
      await worker.stop();
      await gw.close();
      await fs.rm(rootDir, { recursive: true, force: true });
    }
  }, 60_000);
});

const unavailable = SlurmCluster.unavailable();
if (unavailable) {
  // Loud on purpose: these tests cover the Slurm engine end to end and did not run.
  console.warn(
    `\n*** SKIPPING the Slurm engine tests: ${unavailable}. ***\n` +
      '*** They need root and the Debian packages slurm-wlm slurmctld slurmd slurm-client munge. ***\n'
  );
}
const describeSlurm = unavailable ? describe.skip : describe;
const restUnavailable = unavailable
  ? undefined
  : SlurmCluster.restUnavailable();
if (restUnavailable) {
  console.warn(
    `\n*** SKIPPING the slurmrestd tests: ${restUnavailable}. ***\n`
  );
}
const describeRest = unavailable || restUnavailable ? describe.skip : describe;

/** Poll what a client sees until `done` holds. */
const until = <T>(read: () => Promise<T>, done: (value: T) => boolean) =>
  pollUntil(read, done, 45_000, 250);

/** One cluster for both ways of talking to Slurm (its daemons start once). */
describeSlurm('kernels on a real Slurm cluster (two fake GPUs)', () => {
  let cluster: SlurmCluster;
  let daemons: number[] = [];

  beforeAll(async () => {
    cluster = await SlurmCluster.start();
    daemons = cluster.pids();
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  /**
   * A gateway whose Slurm offers go through `slurm`; `model`, `startOffer` and `running` read, start
   * and wait on it.
   */
  function gatewayFor(
    slurm: () =>
      | Promise<{ outputDir: string } & Record<string, unknown>>
      | ({ outputDir: string } & Record<string, unknown>)
  ) {
    const it = {
      gw: undefined as unknown as ITestGateway,
      outputDir: '',
      model: (id: string) => kernelModel(it.gw, id),
      /**
       * Wait until a kernel runs; if it never does, say what its job wrote. Waits past the worker's
       * start-up timeout (60 s), so a kernel that never answers fails with the worker's reason.
       */
      async running(id: string) {
        try {
          const settled = await pollUntil(
            () => it.model(id),
            m => m.execution_state === 'idle' || m.execution_state === 'dead',
            75_000
          );
          if (settled.execution_state === 'dead') {
            throw new Error(`kernel ${id} died: ${settled.reason}`);
          }
          return settled;
        } catch (error) {
          const job = (await it.model(id)).accelerator?.job;
          const log = await fs
            .readFile(path.join(it.outputDir, `ferry-job-${job}.log`), 'utf8')
            .catch(() => '(no output)');
          throw new Error(
            `${(error as Error).message}\njob ${job} wrote:\n${log.slice(-3000)}`
          );
        }
      },
      /** Cancel a kernel's job behind Ferry's back: the kernel is dead, and says why. */
      async cancelledOutside(id: string) {
        const job = (await it.model(id)).accelerator.job;
        await cluster.run('scancel', [job]);
        const dead = await until(
          () => it.model(id),
          m => m.execution_state === 'dead'
        );
        expect(dead.reason).toBe(`Slurm job ${job} was cancelled`);
        expect(dead.accelerator).toMatchObject({ state: 'ended', job });
      },
      async startOffer(body: Record<string, unknown>): Promise<string> {
        const response = await it.gw.api('POST', '/api/kernels', {
          name: 'python3',
          ...body
        });
        expect(response.status).toBe(201);
        expectSchema('Kernel', response.body);
        return response.body.id;
      }
    };
    beforeAll(async () => {
      const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
      const settings = await slurm();
      it.outputDir = settings.outputDir;
      // The jobs' kernels start in the root directory, as another user (slurmrestd's, or nobody,
      // whom a root worker runs kernels as): one that user can enter, wherever this checkout is.
      const rootDir = path.join(cluster.dir, 'notebooks');
      await fs.mkdir(rootDir, { recursive: true });
      await fs.chmod(rootDir, 0o755);
      it.gw = await startGateway({
        rootDir,
        worker: new Worker({
          logger,
          kernelTimings: { shutdownWaitMs: 2000 }
        }),
        workerPort: 0,
        workerToken: WORKER_TOKEN,
        workerGraceMs: 5000,
        offers: OFFERS,
        slurm: { env: cluster.env, pollIntervalMs: 500, ...settings }
      });
    }, 60_000);
    afterAll(async () => {
      await it.gw?.close();
    }, 60_000);
    return it;
  }

  describe('through sbatch, squeue and scancel', () => {
    const it_ = gatewayFor(() => ({ outputDir: cluster.dir }));
    let gw: ITestGateway;
    beforeAll(() => {
      gw = it_.gw;
    });
    const model = (id: string) => it_.model(id);
    const startOffer = (body: Record<string, unknown>) => it_.startOffer(body);
    const running = (id: string) => it_.running(id);

    it('lists the offers in /api/accelerators', async () => {
      const response = await gw.api('GET', '/api/accelerators');
      expectSchema('Accelerators', response.body);
      expect(response.body.offers).toEqual([
        {
          name: 'slurm-gpu',
          displayName: 'GPU on Slurm',
          engine: 'slurm',
          accelerator: { kind: 'gpu', model: 'fake', count: 1 }
        }
      ]);
    });

    it('refuses an offer that does not exist', async () => {
      const response = await gw.api('POST', '/api/kernels', {
        name: 'python3',
        accelerator: { offer: 'nope' }
      });
      expect(response.status).toBe(400);
      expect(response.body.message).toContain(
        "no accelerator offer named 'nope'"
      );
    });

    let first: string;
    let second: string;
    let third: string;

    it('runs a kernel inside a Slurm job, on the GPU Slurm gave it', async () => {
      first = await startOffer({ accelerator: { offer: 'slurm-gpu' } });
      const queued = await model(first);
      expect(queued.accelerator).toMatchObject({
        offer: 'slurm-gpu',
        engine: 'slurm',
        kind: 'gpu',
        count: 1
      });
      expect(queued.accelerator.job).toMatch(/^\d+$/);
      const job = queued.accelerator.job;
      const started = await running(first);
      expect(started.accelerator).toMatchObject({
        state: 'assigned',
        engine: 'slurm',
        job,
        worker: `job-${first}`,
        timeLimit: '10:00'
      });
      expect(started.accelerator.devices).toHaveLength(1);
      expect(await cluster.jobState(job)).toBe('RUNNING|None');
      const client = await KernelSocket.connect(gw, first);
      const result = await client.execute(
        "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['SLURM_JOB_ID'], os.environ.get('FERRY_WORKER_TOKEN'))"
      );
      const [cuda, jobId, token] = result.stdout.trim().split(' ');
      expect(['0', '1']).toContain(cuda);
      expect(jobId).toBe(job);
      // The worker token stays with the worker: the kernel's user code never sees it.
      expect(token).toBe('None');
      client.close();
    }, 90_000);

    it("queues a third kernel with Slurm's reason while both GPUs are taken, and runs it when one frees", async () => {
      second = await startOffer({
        env: { KERNEL_ACCELERATOR: 'offer:slurm-gpu' }
      });
      await running(second);
      third = await startOffer({ accelerator: { offer: 'slurm-gpu' } });
      const waiting = await until(
        () => model(third),
        m => m.accelerator?.reason === 'Resources'
      );
      expect(waiting.accelerator).toMatchObject({
        state: 'queued',
        engine: 'slurm',
        reason: 'Resources'
      });
      const firstJob = (await model(first)).accelerator.job;
      const deleted = await gw.api('DELETE', `/api/kernels/${first}`);
      expect(deleted.status).toBe(204);
      // Deleting the kernel ended its job.
      await until(
        () => cluster.activeJobs(),
        jobs => !jobs.includes(firstJob)
      );
      expect((await running(third)).accelerator.state).toBe('assigned');
    }, 120_000);

    it('marks a kernel dead with the reason when its job is cancelled outside Ferry', async () => {
      await it_.cancelledOutside(second);
    }, 60_000);

    it('cancels a job that is still pending when its kernel is deleted', async () => {
      // One GPU is held by the third kernel: the next job takes the other, the one after waits.
      const running = await startOffer({ accelerator: { offer: 'slurm-gpu' } });
      const waiting = await startOffer({ accelerator: { offer: 'slurm-gpu' } });
      const pending = await until(
        () => model(waiting),
        m => m.accelerator?.reason === 'Resources'
      );
      const job = pending.accelerator.job;
      expect((await gw.api('DELETE', `/api/kernels/${waiting}`)).status).toBe(
        204
      );
      await until(
        () => cluster.activeJobs(),
        jobs => !jobs.includes(job)
      );
      await gw.api('DELETE', `/api/kernels/${running}`);
    }, 60_000);

    it('starts a session on an offer, and deleting the session cancels its job', async () => {
      const created = await gw.api('POST', '/api/sessions', {
        path: 'slurm.ipynb',
        type: 'notebook',
        kernel: {
          name: 'python3',
          env: { KERNEL_ACCELERATOR: 'offer:slurm-gpu' }
        }
      });
      expect(created.status).toBe(201);
      const { accelerator } = created.body.kernel;
      expect(accelerator).toMatchObject({
        offer: 'slurm-gpu',
        engine: 'slurm'
      });
      await gw.api('DELETE', `/api/sessions/${created.body.id}`);
      await until(
        () => cluster.activeJobs(),
        jobs => !jobs.includes(accelerator.job)
      );
    }, 60_000);

    it('moves a kernel onto a Slurm job and back to the CPU under the same id, cancelling the job it leaves', async () => {
      const id = await startOffer({});
      const client = await KernelSocket.connect(gw, id);
      const moved = await gw.api('POST', `/api/kernels/${id}/restart`, {
        accelerator: { offer: 'slurm-gpu' }
      });
      expect(moved.status).toBe(200);
      expectSchema('Kernel', moved.body);
      expect(moved.body).toMatchObject({
        id,
        accelerator: { offer: 'slurm-gpu', engine: 'slurm' }
      });
      const job: string = moved.body.accelerator.job;
      const running = await until(
        () => model(id),
        m => m.execution_state === 'idle' && m.accelerator?.state === 'assigned'
      );
      expect(running.accelerator).toMatchObject({ worker: `job-${id}`, job });
      const where = "import os; print(os.environ.get('SLURM_JOB_ID'))";
      expect((await client.execute(where)).stdout).toBe(`${job}\n`);

      const back = await gw.api('POST', `/api/kernels/${id}/restart`, {
        accelerator: 'cpu'
      });
      expect(back.status).toBe(200);
      expect(back.body.accelerator).toMatchObject({
        kind: 'cpu',
        state: 'assigned',
        devices: []
      });
      expect(back.body.accelerator.job).toBeUndefined();
      expect(back.body.accelerator.worker).not.toBe(`job-${id}`);
      await until(
        () => cluster.activeJobs(),
        jobs => !jobs.includes(job)
      );
      // The job ended because the kernel left it: the kernel lives on, on the CPU.
      expect((await client.execute(where)).stdout).toBe('None\n');
      expect((await model(id)).execution_state).toBe('idle');
      await client.close();
      expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
    }, 90_000);

    it('leaves no job behind once every kernel is deleted', async () => {
      for (const id of [second, third]) {
        await gw.api('DELETE', `/api/kernels/${id}`);
      }
      expect((await gw.api('GET', '/api/kernels')).body).toEqual([]);
      // Their workers are gone at once, not after the grace period.
      const { workers } = (await gw.api('GET', '/api/accelerators')).body;
      expect(
        workers.filter((w: { id: string }) => w.id.startsWith('job-'))
      ).toEqual([]);
      await until(
        () => cluster.activeJobs(),
        jobs => jobs.length === 0
      );
    }, 60_000);

    it('runs a notebook job on a Slurm offer inside a Slurm job, and ends that job with it', async () => {
      const client = new JobsClient({ url: gw.url, token: gw.token });
      const job = await client.submit({
        notebook: notebook([
          codeCell(
            "import os\nprint(os.environ['SLURM_JOB_ID'], os.environ['CUDA_VISIBLE_DEVICES'])"
          )
        ]),
        accelerator: { offer: 'slurm-gpu' }
      });
      expect(job.accelerator).toBe('offer:slurm-gpu');
      const events: JobClientEvent[] = [];
      for await (const event of client.follow(job.id)) {
        events.push(event);
      }
      const done = await client.get(job.id);
      expect(done.state).toBe('succeeded');
      expect(done.worker).toBe(`job-${done.kernel_id}`);
      const printed = events.flatMap(e =>
        e.type === 'output' ? [String(e.data.output.text)] : []
      );
      const [slurmJob, cuda] = printed.join('').trim().split(' ');
      expect(slurmJob).toMatch(/^\d+$/);
      expect(['0', '1']).toContain(cuda);
      // Its kernel is gone, and so is the Slurm job its worker ran in.
      expect((await gw.api('GET', '/api/kernels')).body).toEqual([]);
      await until(
        () => cluster.activeJobs(),
        jobs => !jobs.includes(slurmJob)
      );
    }, 90_000);
  });

  describeRest('through slurmrestd', () => {
    let tokenFile: string;
    const rest = gatewayFor(async () => {
      // A token file, as operators rotate them: the gateway reads it for every request.
      tokenFile = path.join(cluster.dir, 'slurmrestd.token');
      await fs.writeFile(tokenFile, `${await cluster.restToken()}\n`, {
        mode: 0o600
      });
      return {
        outputDir: cluster.rest!.outputDir,
        rest: { url: cluster.rest!.url, tokenFile },
        // A copy its user can run, where this checkout is closed to that user.
        workerCommand: await cluster.restWorkerCommand()
      };
    });
    const model = (id: string) => rest.model(id);
    let first: string;
    let second: string;
    let third: string;

    const running = (id: string) => rest.running(id);

    it('runs a kernel inside a job slurmrestd submitted, as its user, on the GPU Slurm gave it', async () => {
      first = await rest.startOffer({ accelerator: { offer: 'slurm-gpu' } });
      const job = (await model(first)).accelerator.job;
      expect(job).toMatch(/^\d+$/);
      const started = await running(first);
      expect(started.accelerator).toMatchObject({
        state: 'assigned',
        engine: 'slurm',
        job,
        worker: `job-${first}`,
        timeLimit: '10:00'
      });
      expect(await cluster.jobState(job)).toBe('RUNNING|None');
      expect(
        (await cluster.run('squeue', ['-h', '-j', job, '-o', '%u'])).trim()
      ).toBe(cluster.rest!.user);
      const client = await KernelSocket.connect(rest.gw, first);
      const result = await client.execute(
        "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['SLURM_JOB_ID'], os.environ.get('FERRY_WORKER_TOKEN'), os.environ.get('SLURM_JWT'), os.path.expanduser('~'))"
      );
      const [cuda, jobId, token, jwt, home] = result.stdout.trim().split(' ');
      // The job runs as the token's user, in that user's home, not the gateway user's.
      expect(home).not.toBe(os.homedir());
      expect(['0', '1']).toContain(cuda);
      expect(jobId).toBe(job);
      expect(token).toBe('None');
      // The gateway's slurmrestd token never reaches a job.
      expect(jwt).toBe('None');
      client.close();
    }, 90_000);

    it("queues a kernel with Slurm's reason while both GPUs are taken, runs it when one frees, and deleting a kernel cancels its job", async () => {
      second = await rest.startOffer({ accelerator: { offer: 'slurm-gpu' } });
      await running(second);
      third = await rest.startOffer({ accelerator: { offer: 'slurm-gpu' } });
      const waiting = await until(
        () => model(third),
        m => m.accelerator?.reason === 'Resources'
      );
      expect(waiting.accelerator).toMatchObject({
        state: 'queued',
        engine: 'slurm',
        reason: 'Resources'
      });
      const firstJob = (await model(first)).accelerator.job;
      expect(
        (await rest.gw.api('DELETE', `/api/kernels/${first}`)).status
      ).toBe(204);
      await until(
        () => cluster.activeJobs(),
        jobs => !jobs.includes(firstJob)
      );
      expect((await running(third)).accelerator.state).toBe('assigned');
    }, 120_000);

    it('marks a kernel dead with the reason when its job is cancelled outside Ferry', async () => {
      await rest.cancelledOutside(second);
    }, 60_000);

    it('refuses to start a kernel with a clear error when slurmctld does not take the token, without the token in it', async () => {
      const good = await fs.readFile(tokenFile, 'utf8');
      const bad = Private.foreignToken(cluster.rest!.user);
      const kernels = (await rest.gw.api('GET', '/api/kernels')).body.length;
      await fs.writeFile(tokenFile, `SLURM_JWT=${bad}\n`);
      try {
        const response = await rest.gw.api('POST', '/api/kernels', {
          name: 'python3',
          accelerator: { offer: 'slurm-gpu' }
        });
        expect(response.status).toBe(500);
        expect(response.body.message).toMatch(
          /^could not submit a slurm job for offer slurm-gpu: slurmrestd at unix:\S+ refused the job: .*token/
        );
        expect(JSON.stringify(response.body)).not.toContain(bad);
        expect(JSON.stringify(response.body)).not.toContain(bad.split('.')[2]);
        // No kernel was left behind for it.
        expect((await rest.gw.api('GET', '/api/kernels')).body).toHaveLength(
          kernels
        );
      } finally {
        await fs.writeFile(tokenFile, good);
      }
      // With the good token back (read again for each request), kernels start again.
      const again = await rest.startOffer({
        accelerator: { offer: 'slurm-gpu' }
      });
      expect((await model(again)).accelerator.job).toMatch(/^\d+$/);
      expect(
        (await rest.gw.api('DELETE', `/api/kernels/${again}`)).status
      ).toBe(204);
    }, 60_000);

    it('says what slurmrestd said when it refuses a job, and which sbatch options it cannot take', async () => {
      const provisioner = new SlurmProvisioner({
        gateway: () => '127.0.0.1:1',
        token: WORKER_TOKEN,
        workerCommand: ['/bin/true'],
        logger: createLogger('silent'),
        rest: { url: cluster.rest!.url, tokenFile }
      });
      try {
        const offer = (
          slurm: IAcceleratorOffer['slurm']
        ): IAcceleratorOffer => ({
          ...OFFERS[0],
          slurm
        });
        await expect(
          provisioner.provision(
            'k',
            offer({ gres: 'gpu:1', partition: 'nope' })
          )
        ).rejects.toThrow(
          `slurmrestd at ${cluster.rest!.url} refused the job: Invalid partition name specified`
        );
        await expect(
          provisioner.provision(
            'k',
            offer({ gres: 'gpu:1', extraArgs: ['--mem=4G'] })
          )
        ).rejects.toThrow(
          "slurmrestd cannot take the sbatch option '--mem=4G'"
        );
      } finally {
        provisioner.dispose();
      }
    });

    it('leaves no job behind once every kernel is deleted', async () => {
      for (const id of [second, third]) {
        await rest.gw.api('DELETE', `/api/kernels/${id}`);
      }
      expect((await rest.gw.api('GET', '/api/kernels')).body).toEqual([]);
      await until(
        () => cluster.activeJobs(),
        jobs => jobs.length === 0
      );
    }, 60_000);
  });

  it('stops every daemon on teardown', async () => {
    expect(daemons).toHaveLength(restUnavailable ? 3 : 4);
    await cluster.stop();
    expect(daemons.filter(pid => processAlive(pid))).toEqual([]);
  }, 60_000);
});

namespace Private {
  /** A well-formed token for `user` that this cluster did not sign (another cluster's key). */
  export function foreignToken(user: string): string {
    const part = (value: object) =>
      Buffer.from(JSON.stringify(value)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ exp: now + 3600, iat: now, sun: user })}`;
    const signature = createHmac('sha256', randomBytes(32))
      .update(unsigned)
      .digest('base64url');
    return `${unsigned}.${signature}`;
  }
}
