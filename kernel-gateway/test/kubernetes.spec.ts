import { spawn } from 'node:child_process';
import { promises as fs, realpathSync, statSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import type { V1EnvVar, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Pod } from 'kubernetes-models/v1/Pod';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Command } from 'commander';
import { parse, parseAllDocuments } from 'yaml';
import {
  checkProfiles,
  createGateway,
  createLogger,
  workerManifests,
  workerTokenSecret,
  Worker,
  type IAcceleratorOffer,
  type IWorkerManifestOptions
} from '../src';
import {
  expectSchema,
  KernelSocket,
  kernelModel,
  pollUntil,
  startGateway,
  type ITestGateway
} from './helpers';
import { KubernetesStandIn, type IObject } from './kubernetes-stand-in';
import { podSecurityViolations } from './pod-security-standards';
import {
  callAs as call,
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn
} from './oidc-harness';
import { declareOptions } from '../src/cli/options';
import {
  GATEWAY_OPTIONS,
  gatewaySettings,
  type GatewayFlags
} from '../src/options';
import type { IRunAs } from '../src/protocol';
import { jobWorkerToken } from '../src/protocol/job-token';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');
const WORKER_TOKEN = 'worker-token-for-kubernetes-tests';
const NAMESPACE = 'notebooks';

const GPU: IAcceleratorOffer = {
  name: 'a100',
  displayName: 'A100 on Kubernetes',
  accelerator: { kind: 'gpu', model: 'A100', count: 1 },
  kubernetes: {
    limits: { 'nvidia.com/gpu': 1, memory: '16Gi' },
    nodeSelector: { 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-40GB' },
    tolerations: [
      { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }
    ]
  }
};

const MIG: IAcceleratorOffer = {
  name: 'a100-mig-1g',
  accelerator: { kind: 'gpu', model: 'A100', count: 1, profile: '1g.10gb' },
  kubernetes: { limits: { 'nvidia.com/mig-1g.10gb': 1 } }
};

const TPU: IAcceleratorOffer = {
  name: 'v5e-4',
  accelerator: { kind: 'tpu', model: 'v5e', count: 4 },
  kubernetes: {
    image: 'us-docker.pkg.dev/example/ferry-worker:tpu',
    limits: { 'google.com/tpu': 4 },
    nodeSelector: {
      'cloud.google.com/gke-tpu-accelerator': 'tpu-v5-lite-podslice'
    },
    topology: '2x2',
    tolerations: [
      { key: 'google.com/tpu', operator: 'Exists', effect: 'NoSchedule' }
    ]
  }
};

const TPU_SLICE: IAcceleratorOffer = {
  name: 'v5e-2x4',
  displayName: 'TPU v5e 2x4 (2 hosts)',
  accelerator: { kind: 'tpu', model: 'v5e', count: 4 },
  kubernetes: {
    ...TPU.kubernetes,
    topology: '2x4',
    hosts: 2,
    followerCommand: 'python3 -m my_lab.jax_follower'
  }
};

/** The manifests of `offer` for a kernel, as the gateway would build them. */
function manifestsFor(
  offer: IAcceleratorOffer,
  kernelId = 'k-1',
  more: Partial<IWorkerManifestOptions> = {}
) {
  const options: IWorkerManifestOptions = {
    kernelId,
    offer,
    namespace: NAMESPACE,
    image: 'ghcr.io/example/ferry-worker:1',
    workerCommand: ['ferry'],
    gateway: 'ferry-gateway.notebooks.svc:8889',
    secretName: 'ferry-worker-token',
    ...more
  };
  return workerManifests(options);
}

/** The pod specs of a kernel's manifests: its pod's, or its Job's pod template's. */
function podSpecsOf(manifests: ReturnType<typeof workerManifests>) {
  return manifests.kind === 'Pod'
    ? [manifests.pod.spec!]
    : [manifests.job.spec!.template.spec!];
}

/** The pod of a single-host offer. */
function podFor(offer: IAcceleratorOffer, kernelId?: string): V1Pod {
  const manifests = manifestsFor(offer, kernelId);
  if (manifests.kind !== 'Pod') {
    throw new Error(`expected a pod, got a ${manifests.kind}`);
  }
  return manifests.pod;
}

/** Assert that kubernetes-models accepts `manifest` as an object of its kind. */
function expectValid(
  Model: { new (data: never): { validate(): void } },
  manifest: unknown
): void {
  expect(() => new Model(manifest as never).validate()).not.toThrow();
}

/** The value of a container variable. */
function envOf(pod: { spec?: V1Pod['spec'] }, name: string): V1EnvVar {
  const found = pod.spec?.containers[0].env?.find(e => e.name === name);
  if (!found) {
    throw new Error(`no variable ${name}`);
  }
  return found;
}

describe('Kubernetes manifests, validated against the Kubernetes schema (kubernetes-models)', () => {
  it('runs a GPU offer in one pod with its limits, selectors and tolerations, and ferry worker --once', () => {
    const pod = podFor(GPU, 'k-gpu');
    expectValid(Pod, pod);
    expect(pod.metadata).toMatchObject({
      name: 'ferry-k-gpu',
      namespace: NAMESPACE,
      labels: {
        'app.kubernetes.io/managed-by': 'ferry',
        'ferry.dev/kernel': 'k-gpu'
      }
    });
    const spec = pod.spec!;
    expect(spec.restartPolicy).toBe('Never');
    expect(spec.nodeSelector).toEqual(GPU.kubernetes!.nodeSelector);
    expect(spec.tolerations).toEqual(GPU.kubernetes!.tolerations);
    const [container] = spec.containers;
    expect(container.image).toBe('ghcr.io/example/ferry-worker:1');
    expect(container.resources?.limits).toEqual({
      'nvidia.com/gpu': '1',
      memory: '16Gi'
    });
    expect(container.command).toEqual([
      'ferry',
      'worker',
      '--once',
      '--id',
      'job-k-gpu',
      '--name',
      'a100 (Kubernetes)',
      '--gateway',
      'ferry-gateway.notebooks.svc:8889',
      '--no-cpu',
      '--allocated',
      'gpu:A100'
    ]);
    expect(envOf(pod, 'CUDA_VISIBLE_DEVICES').value).toBe('0');
    // The token comes from a Secret; the manifest only names it.
    expect(envOf(pod, 'FERRY_WORKER_TOKEN')).toEqual({
      name: 'FERRY_WORKER_TOKEN',
      valueFrom: {
        secretKeyRef: { name: 'ferry-worker-token', key: 'token' }
      }
    });
  });

  it('asks for a MIG instance by its resource name', () => {
    const pod = podFor(MIG);
    expectValid(Pod, pod);
    expect(pod.spec!.containers[0].resources?.limits).toEqual({
      'nvidia.com/mig-1g.10gb': '1'
    });
    expect(envOf(pod, 'CUDA_VISIBLE_DEVICES').value).toBe('0');
  });

  it('puts a single-host TPU offer on a GKE TPU node: chips, accelerator and topology selectors, taint toleration', () => {
    const pod = podFor(TPU);
    expectValid(Pod, pod);
    const spec = pod.spec!;
    expect(spec.nodeSelector).toEqual({
      'cloud.google.com/gke-tpu-accelerator': 'tpu-v5-lite-podslice',
      'cloud.google.com/gke-tpu-topology': '2x2'
    });
    expect(spec.tolerations).toEqual([
      { key: 'google.com/tpu', operator: 'Exists', effect: 'NoSchedule' }
    ]);
    expect(spec.containers[0].resources?.limits).toEqual({
      'google.com/tpu': '4'
    });
    expect(spec.containers[0].image).toBe(TPU.kubernetes!.image);
    expect(envOf(pod, 'TPU_VISIBLE_CHIPS').value).toBe('0,1,2,3');
    expect(spec.containers[0].command).toContain('tpu:v5e');
  });

  it('runs a multi-host TPU slice as an Indexed Job with a headless Service', () => {
    const manifests = manifestsFor(TPU_SLICE, 'k-slice');
    if (manifests.kind !== 'Job') {
      throw new Error('expected a Job');
    }
    const { job, service } = manifests;
    expectValid(Job, job);
    expectValid(Service, service);
    expect(job.spec).toMatchObject({
      completionMode: 'Indexed',
      completions: 2,
      parallelism: 2,
      backoffLimit: 0
    });
    const template = job.spec!.template;
    expect(template.metadata?.labels).toMatchObject({
      'ferry.dev/kernel': 'k-slice'
    });
    expect(template.spec!.restartPolicy).toBe('Never');
    // Pods get host names <job>-<index>.<service>, which GKE lists in TPU_WORKER_HOSTNAMES.
    expect(template.spec!.subdomain).toBe(service.metadata!.name);
    expect(template.spec!.nodeSelector).toMatchObject({
      'cloud.google.com/gke-tpu-topology': '2x4'
    });
    expect(template.spec!.containers[0].resources?.limits).toEqual({
      'google.com/tpu': '4'
    });
    expect(service.spec).toMatchObject({
      clusterIP: 'None',
      selector: { 'ferry.dev/kernel': 'k-slice' }
    });
    // Host 0 runs the kernel's worker; the others the follower, without the worker token.
    const [shell, flag, script, , ...worker] =
      template.spec!.containers[0].command!;
    expect([shell, flag]).toEqual(['/bin/sh', '-c']);
    expect(script).toContain(
      'if [ "$JOB_COMPLETION_INDEX" = 0 ]; then exec "$@"; fi'
    );
    expect(script).toContain(
      'unset FERRY_WORKER_TOKEN; exec python3 -m my_lab.jax_follower'
    );
    expect(worker.slice(0, 5)).toEqual([
      'ferry',
      'worker',
      '--once',
      '--id',
      'job-k-slice'
    ]);
  });

  it('keeps the worker token in a Secret', () => {
    const secret = workerTokenSecret('ferry-worker-token', NAMESPACE, 's3cret');
    expectValid(Secret, secret);
    expect(secret.stringData).toEqual({ token: 's3cret' });
    for (const offer of [GPU, MIG, TPU, TPU_SLICE]) {
      expect(JSON.stringify(manifestsFor(offer))).not.toContain('s3cret');
    }
  });

  it('is checked by a validator that refuses a malformed pod', () => {
    const pod = podFor(GPU);
    const broken = {
      ...pod,
      spec: { ...pod.spec, containers: [{ image: 'x' }] }
    };
    expect(() => new Pod(broken as never).validate()).toThrow(/name/);
  });
});

describe('Pod Security Standards: every pod Ferry builds passes restricted (no API server here: pod-security-standards.ts applies the profiles’ rules as Pod Security Admission would)', () => {
  const ANN: IRunAs = {
    uid: 61001,
    gid: 61001,
    user: 'ann',
    home: '/home/ann'
  };
  const OFFERS = [GPU, MIG, TPU, TPU_SLICE];

  it('passes restricted for every offer: the token owner’s pods and a person’s, their containers and init containers', () => {
    for (const offer of OFFERS) {
      for (const runAs of [undefined, ANN]) {
        for (const spec of podSpecsOf(manifestsFor(offer, 'k', { runAs }))) {
          expect([
            offer.name,
            runAs?.user,
            podSecurityViolations(spec, 'restricted')
          ]).toEqual([offer.name, runAs?.user, []]);
          expect(spec.securityContext).toMatchObject({
            runAsNonRoot: true,
            seccompProfile: { type: 'RuntimeDefault' }
          });
          for (const container of [
            ...spec.containers,
            ...(spec.initContainers ?? [])
          ]) {
            expect(container.securityContext).toEqual({
              allowPrivilegeEscalation: false,
              capabilities: { drop: ['ALL'] }
            });
          }
        }
      }
    }
    // The token owner's pod runs as the image's (numeric, non-root) user; a person's as them.
    expect(podFor(GPU).spec!.securityContext).toEqual({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' }
    });
  });

  it('is checked by rules that refuse what restricted refuses, in init containers too', () => {
    const spec = podFor(GPU).spec!;
    const broken: V1PodSpec = {
      ...spec,
      hostNetwork: true,
      securityContext: { runAsUser: 0 },
      initContainers: [
        {
          name: 'setup',
          image: 'busybox',
          securityContext: {
            privileged: true,
            capabilities: { add: ['SYS_ADMIN'] }
          }
        }
      ]
    };
    expect(podSecurityViolations(broken, 'baseline')).toEqual([
      'spec.hostNetwork',
      'spec.initContainers[0].securityContext.privileged',
      'spec.initContainers[0].securityContext.capabilities.add (SYS_ADMIN)'
    ]);
    expect(podSecurityViolations(broken, 'restricted')).toEqual([
      'spec.hostNetwork',
      'spec.initContainers[0].securityContext.privileged',
      'spec.initContainers[0].securityContext.capabilities.add (SYS_ADMIN)',
      'spec.securityContext.runAsUser (0)',
      // The worker's container keeps its own context; only the pod's seccomp and non-root went.
      'spec.containers[0].securityContext.runAsNonRoot must be true',
      'spec.containers[0].securityContext.seccompProfile.type must be RuntimeDefault or Localhost',
      'spec.initContainers[0].securityContext.allowPrivilegeEscalation must be false',
      'spec.initContainers[0].securityContext.runAsNonRoot must be true',
      'spec.initContainers[0].securityContext.seccompProfile.type must be RuntimeDefault or Localhost',
      'spec.initContainers[0].securityContext.capabilities.drop must include ALL',
      'spec.initContainers[0].securityContext.capabilities.add (SYS_ADMIN)'
    ]);
  });

  it('relaxed to baseline (--kube-pod-security baseline), passes baseline; a person’s pod still runs as them, never root, without privilege escalation', () => {
    for (const offer of OFFERS) {
      for (const runAs of [undefined, ANN]) {
        const manifests = manifestsFor(offer, 'k', {
          runAs,
          podSecurity: 'baseline'
        });
        for (const spec of podSpecsOf(manifests)) {
          expect(podSecurityViolations(spec, 'baseline')).toEqual([]);
          expect(podSecurityViolations(spec, 'restricted')).not.toEqual([]);
        }
      }
    }
    const owners = podFor(GPU, 'k');
    const relaxed = manifestsFor(GPU, 'k', { podSecurity: 'baseline' });
    expect(relaxed.kind === 'Pod' && relaxed.pod.spec).toEqual({
      ...owners.spec,
      securityContext: undefined,
      containers: [
        { ...owners.spec!.containers[0], securityContext: undefined }
      ]
    });
    const [persons] = podSpecsOf(
      manifestsFor(GPU, 'k', { runAs: ANN, podSecurity: 'baseline' })
    );
    expect(persons.securityContext).toEqual({
      runAsUser: ANN.uid,
      runAsGroup: ANN.gid,
      runAsNonRoot: true,
      fsGroup: ANN.gid
    });
    expect(persons.containers[0].securityContext).toEqual({
      allowPrivilegeEscalation: false
    });
  });
});

describe('--kube-pod-security', () => {
  /** The gateway's Kubernetes settings from `ferry gateway` arguments. */
  function kubernetesSettings(args: string[]) {
    let flags: GatewayFlags | undefined;
    declareOptions(new Command('gateway'), GATEWAY_OPTIONS)
      .exitOverride()
      .configureOutput({ writeErr: () => undefined })
      .action((parsed: GatewayFlags) => {
        flags = parsed;
      })
      .parse(args, { from: 'user' });
    return gatewaySettings(flags!, {}).kubernetes;
  }

  it('takes restricted (the default when left out) or baseline, and nothing looser', () => {
    expect(kubernetesSettings([])?.podSecurity).toBeUndefined();
    expect(
      kubernetesSettings(['--kube-pod-security', 'baseline'])?.podSecurity
    ).toBe('baseline');
    expect(() =>
      kubernetesSettings(['--kube-pod-security', 'privileged'])
    ).toThrow(/Allowed choices are restricted, baseline/);
  });
});

describe('accelerator profiles with Kubernetes offers', () => {
  it('accepts GPU, MIG, TPU and multi-host TPU offers', () => {
    const offers = [GPU, MIG, TPU, TPU_SLICE];
    expect(checkProfiles({ offers }, 'p.yaml')).toEqual(offers);
  });

  it('names the bad field of a bad Kubernetes offer', () => {
    const bad = (kubernetes: Record<string, unknown>) => () =>
      checkProfiles(
        {
          offers: [
            { name: 'x', accelerator: { kind: 'gpu', count: 1 }, kubernetes }
          ]
        },
        'p.yaml'
      );
    expect(bad({ limits: { 'nvidia.com/gpu': 'lots' } })).toThrow(
      'offers.0.kubernetes.limits.nvidia.com~1gpu'
    );
    expect(bad({ tolerations: [{ key: 'a', operator: 'Maybe' }] })).toThrow(
      'offers.0.kubernetes.tolerations.0.operator: must be equal to one of the allowed values'
    );
    expect(bad({ hosts: 0 })).toThrow(
      'offers.0.kubernetes.hosts: must be >= 1'
    );
    expect(bad({ topology: '2 by 4' })).toThrow(
      'offers.0.kubernetes.topology: must match pattern'
    );
    expect(bad({ nodeSelecter: {} })).toThrow(
      "offers.0.kubernetes: unknown field 'nodeSelecter'"
    );
  });

  it("accepts docs/kubernetes.md's example offers and Role, and builds valid manifests from the offers", async () => {
    const page = await fs.readFile(
      path.join(__dirname, '..', '..', 'docs', 'kubernetes.md'),
      'utf8'
    );
    const section = page.slice(0, page.indexOf('**What is tested here'));
    const blocks = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map(
      m => m[1]
    );
    expect(blocks).toHaveLength(2);
    const offers = checkProfiles(parse(blocks[0]), 'docs/kubernetes.md');
    expect(offers.map(o => o.name)).toEqual([
      'a100',
      'a100-1g',
      'v5e-4',
      'v5e-2x4'
    ]);
    for (const offer of offers) {
      const manifests = manifestsFor(offer);
      if (manifests.kind === 'Pod') {
        expectValid(Pod, manifests.pod);
      } else {
        expectValid(Job, manifests.job);
        expectValid(Service, manifests.service);
      }
    }
    const [role, binding] = parseAllDocuments(blocks[1]).map(d => d.toJS());
    expectValid(Role, role);
    expectValid(RoleBinding, binding);
  });

  it('refuses to start a gateway with a Kubernetes offer but no image for its pods', () => {
    expect(() =>
      createGateway({
        logger: createLogger('silent'),
        token: 't',
        workerPort: 0,
        workerToken: WORKER_TOKEN,
        offers: [GPU]
      })
    ).toThrow('offer a100 names no image for its pod');
  });
});

describe('kernels on Kubernetes offers, against a loopback stand-in for the Kubernetes API server (not a real cluster)', () => {
  let standIn: KubernetesStandIn;
  let gw: ITestGateway;
  let dir: string;

  const model = (id: string) => kernelModel(gw, id);

  /** Poll what a client sees until `done` holds. */
  const until = <T>(read: () => Promise<T>, done: (value: T) => boolean) =>
    pollUntil(read, done, 30_000, 100);

  async function startOffer(offer: string): Promise<string> {
    const response = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      accelerator: { offer }
    });
    expect([response.status, response.body.message]).toEqual([201, undefined]);
    expectSchema('Kernel', response.body);
    return response.body.id;
  }

  /** The pod the gateway posted for a kernel, once posted. */
  async function postedPod(kernelId: string): Promise<IObject> {
    const call = await standIn.waitForCall(
      c =>
        c.method === 'POST' &&
        c.path === `/api/v1/namespaces/${NAMESPACE}/pods` &&
        c.body?.metadata.labels?.['ferry.dev/kernel'] === kernelId
    );
    return call.body!;
  }

  /** Play the kubelet: set a pod's phase (and why). */
  function setPhase(
    name: string,
    phase: string,
    extra: Record<string, unknown> = {}
  ): void {
    standIn.modify('pods', NAMESPACE, name, pod => {
      pod.status = { phase, ...extra };
    });
  }

  /**
   * Run what the pod's container would: its command, with the variables its spec carries (the
   * worker token read from the Secret it names), as a real `ferry worker` process.
   */
  function runPodLocally(pod: IObject) {
    const container = (pod as unknown as V1Pod).spec!.containers[0];
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LANG: process.env.LANG
    };
    for (const variable of container.env ?? []) {
      const ref = variable.valueFrom?.secretKeyRef;
      if (ref) {
        const secret = standIn.get('secrets', NAMESPACE, ref.name!);
        env[variable.name] = (secret?.stringData as Record<string, string>)[
          ref.key
        ];
      } else {
        env[variable.name] = variable.value;
      }
    }
    const [command, ...args] = container.command!;
    // As a container's own user would: the tests run as root, where ferry worker would otherwise
    // run kernels as nobody, who cannot enter a checkout in a private directory.
    args.push('--kernel-user', String(process.getuid!()));
    const child = spawn(command, args, {
      env,
      stdio: ['ignore', 'pipe', 'pipe']
    });
    let logs = '';
    child.stderr.on('data', chunk => (logs += chunk));
    const registered = new Promise<void>(resolve =>
      createInterface({ input: child.stdout }).on('line', line => {
        if (line.includes('registered with')) {
          resolve();
        }
      })
    );
    const exited = new Promise<number | null>(resolve =>
      child.once('exit', code => resolve(code))
    );
    return { child, registered, exited, logs: () => logs };
  }

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-kubernetes-'));
    standIn = await KubernetesStandIn.start();
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    gw = await startGateway({
      worker: new Worker({ logger, kernelTimings: { shutdownWaitMs: 2000 } }),
      workerPort: 0,
      workerToken: WORKER_TOKEN,
      workerGraceMs: 5000,
      offers: [GPU, TPU_SLICE],
      kubernetes: {
        kubeconfig: await standIn.writeKubeconfig(dir, NAMESPACE),
        image: 'ghcr.io/example/ferry-worker:1',
        // The "image" is this checkout: the test runs the pod's command itself.
        workerCommand: [process.execPath, FERRY]
      }
    });
  });

  afterAll(async () => {
    await gw?.close();
    await standIn?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('lists the Kubernetes offers in /api/accelerators', async () => {
    const response = await gw.api('GET', '/api/accelerators');
    expectSchema('Accelerators', response.body);
    expect(response.body.offers).toEqual([
      {
        name: 'a100',
        displayName: 'A100 on Kubernetes',
        engine: 'kubernetes',
        accelerator: { kind: 'gpu', model: 'A100', count: 1 }
      },
      {
        name: 'v5e-2x4',
        displayName: 'TPU v5e 2x4 (2 hosts)',
        engine: 'kubernetes',
        accelerator: { kind: 'tpu', model: 'v5e', count: 4 }
      }
    ]);
  });

  it('posts a pod for the kernel, shows the scheduler’s reason while it waits, runs the kernel in the pod’s worker, and deletes the pod with the kernel', async () => {
    const id = await startOffer('a100');
    const pod = await postedPod(id);
    const name = pod.metadata.name;
    expectValid(Pod, pod);
    expect((pod as unknown as V1Pod).spec!.containers[0].resources).toEqual({
      limits: { 'nvidia.com/gpu': '1', memory: '16Gi' }
    });
    // The token went into the Secret, never into the pod.
    expect(JSON.stringify(pod)).not.toContain(WORKER_TOKEN);
    const secret = standIn.get('secrets', NAMESPACE, 'ferry-worker-token');
    expect(secret?.stringData).toEqual({ token: WORKER_TOKEN });

    const message = '0/3 nodes are available: 3 Insufficient nvidia.com/gpu.';
    standIn.event(
      NAMESPACE,
      { kind: 'Pod', name },
      'FailedScheduling',
      message
    );
    const queued = await until(
      () => model(id),
      m => m.accelerator?.reason === message
    );
    expect(queued.execution_state).toBe('starting');
    expect(queued.accelerator).toMatchObject({
      state: 'queued',
      offer: 'a100',
      engine: 'kubernetes',
      job: name,
      reason: message
    });

    // A node frees up: the pod is scheduled and its worker (run here, as the pod would) dials home.
    standIn.event(
      NAMESPACE,
      { kind: 'Pod', name },
      'Scheduled',
      `Successfully assigned ${NAMESPACE}/${name} to gpu-node-2`,
      'Normal'
    );
    const worker = runPodLocally(pod);
    try {
      await worker.registered;
      setPhase(name, 'Running');
      const running = await until(
        () => model(id),
        m => m.execution_state === 'idle'
      );
      expect(running.accelerator).toMatchObject({
        state: 'assigned',
        engine: 'kubernetes',
        job: name,
        worker: `job-${id}`
      });
      const client = await KernelSocket.connect(gw, id);
      const result = await client.execute(
        "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ.get('FERRY_WORKER_TOKEN'))"
      );
      // The kernel sees the pod's GPU; the worker token stays with the worker.
      expect(result.stdout.trim()).toBe('0 None');
      client.close();

      expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
      await standIn.waitForCall(
        c =>
          c.method === 'DELETE' &&
          c.path === `/api/v1/namespaces/${NAMESPACE}/pods/${name}`
      );
      expect(standIn.get('pods', NAMESPACE, name)).toBeUndefined();
      // Its worker ran one kernel (--once) and left when the kernel was shut down.
      expect(await worker.exited).toBe(0);
    } finally {
      worker.child.kill();
    }
  }, 60_000);

  it('marks a kernel dead with the reason when its pod fails', async () => {
    const id = await startOffer('a100');
    const { name } = (await postedPod(id)).metadata;
    setPhase(name, 'Failed', {
      reason: 'Evicted',
      message: 'The node was low on resource: memory.'
    });
    const dead = await until(
      () => model(id),
      m => m.execution_state === 'dead'
    );
    expect(dead.reason).toBe(
      `Kubernetes pod ${name} failed: Evicted: The node was low on resource: memory.`
    );
    expect(dead.accelerator).toMatchObject({ state: 'ended', job: name });
    // What is left of it is cleaned up.
    await standIn.waitForCall(
      c => c.method === 'DELETE' && c.path.endsWith(`/pods/${name}`)
    );
  });

  it('marks a kernel dead with the reason when its pod is deleted outside Ferry', async () => {
    const id = await startOffer('a100');
    const { name } = (await postedPod(id)).metadata;
    setPhase(name, 'Running');
    standIn.remove('pods', NAMESPACE, name);
    const dead = await until(
      () => model(id),
      m => m.execution_state === 'dead'
    );
    expect(dead.reason).toBe(`Kubernetes pod ${name} was deleted`);
  });

  it('starts a multi-host TPU slice as an Indexed Job and headless Service, follows host 0, and deletes both with the kernel', async () => {
    const id = await startOffer('v5e-2x4');
    const jobs = `/apis/batch/v1/namespaces/${NAMESPACE}/jobs`;
    const services = `/api/v1/namespaces/${NAMESPACE}/services`;
    const job = (
      await standIn.waitForCall(c => c.method === 'POST' && c.path === jobs)
    ).body!;
    const service = (
      await standIn.waitForCall(c => c.method === 'POST' && c.path === services)
    ).body!;
    expectValid(Job, job);
    expectValid(Service, service);
    const name = job.metadata.name;
    expect(service.metadata.name).toBe(name);

    // Play the Job controller: one pod per index, host 1 scheduled, host 0 waiting for a node.
    const template = (job.spec as { template: IObject }).template;
    for (const index of ['0', '1']) {
      standIn.add('pods', NAMESPACE, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: `${name}-${index}-x7k2p`,
          labels: {
            ...template.metadata.labels,
            'batch.kubernetes.io/job-completion-index': index
          }
        },
        spec: template.spec,
        status: { phase: index === '0' ? 'Pending' : 'Running' }
      });
    }
    const message =
      "0/8 nodes are available: 8 node(s) didn't match Pod's node affinity/selector.";
    standIn.event(
      NAMESPACE,
      { kind: 'Pod', name: `${name}-0-x7k2p` },
      'FailedScheduling',
      message
    );
    const queued = await until(
      () => model(id),
      m => m.accelerator?.reason === message
    );
    expect(queued.accelerator).toMatchObject({
      state: 'queued',
      engine: 'kubernetes',
      job: name
    });

    expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
    const deleted = await standIn.waitForCall(
      c => c.method === 'DELETE' && c.path === `${jobs}/${name}`
    );
    // Deleting the Job takes its pods with it.
    expect(deleted.query.get('propagationPolicy')).toBe('Background');
    await standIn.waitForCall(
      c => c.method === 'DELETE' && c.path === `${services}/${name}`
    );
  });

  it('follows its pods and their events with ?watch=true streams', () => {
    const watched = standIn.calls
      .filter(c => c.method === 'GET' && c.query.get('watch') === 'true')
      .map(c => c.path);
    expect(new Set(watched)).toEqual(
      new Set([
        `/api/v1/namespaces/${NAMESPACE}/pods`,
        `/api/v1/namespaces/${NAMESPACE}/events`
      ])
    );
    expect(
      standIn.calls
        .find(c => c.path.endsWith('/pods') && c.query.get('watch') === 'true')
        ?.query.get('labelSelector')
    ).toBe('app.kubernetes.io/managed-by=ferry');
  });

  it('posted only pods and Jobs that pass the restricted Pod Security Standard (the rules applied here: the API server is a stand-in)', () => {
    const posted = standIn.calls.filter(
      c =>
        c.method === 'POST' &&
        (c.path.endsWith('/pods') || c.path.endsWith('/jobs'))
    );
    expect(posted.length).toBeGreaterThanOrEqual(4);
    for (const call of posted) {
      // A pod's spec, or a Job's pod template's.
      const object = call.body as unknown as {
        spec: V1PodSpec & { template?: { spec: V1PodSpec } };
      };
      const spec = object.spec.template?.spec ?? object.spec;
      expect(podSecurityViolations(spec, 'restricted')).toEqual([]);
    }
  });
});

describe('a signed-in person’s kernel on Kubernetes runs as them (a gateway process signing people in, against the stand-in)', () => {
  let standIn: KubernetesStandIn;
  let env: IOidcGateway;
  let dir: string;
  let ann: ISignedIn;

  /** The pod the gateway posted for a kernel, once posted. */
  async function postedPod(kernelId: string): Promise<V1Pod> {
    const call = await standIn.waitForCall(
      c =>
        c.method === 'POST' &&
        c.path === `/api/v1/namespaces/${NAMESPACE}/pods` &&
        c.body?.metadata.labels?.['ferry.dev/kernel'] === kernelId
    );
    return call.body as unknown as V1Pod;
  }

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-kubernetes-people-'));
    standIn = await KubernetesStandIn.start();
    const profiles = path.join(dir, 'profiles.json');
    await fs.writeFile(profiles, JSON.stringify({ offers: [GPU] }));
    env = await startOidcGateway({
      args: [
        '--profiles',
        profiles,
        '--worker-port',
        '0',
        '--kubeconfig',
        await standIn.writeKubeconfig(dir, NAMESPACE),
        '--kube-image',
        'ghcr.io/example/ferry-worker:1'
      ],
      env: { FERRY_WORKER_TOKEN: WORKER_TOKEN }
    });
    ann = await signIn(env.gateway.url, 'ann');
  }, 60_000);

  afterAll(async () => {
    await env?.stop();
    await standIn?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('posts her pod with her uid and gid, her worker --owner-uid, and a token of that job alone; the token owner’s pod as the image’s user', async () => {
    const url = env.gateway.url;
    const started = await call(url, ann, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: { offer: 'a100' }
    });
    expect([started.status, started.body.message]).toEqual([201, undefined]);
    const id: string = started.body.id;
    const pod = await postedPod(id);
    expectValid(Pod, pod);
    // Her uid is her folder's owner's.
    const folder = statSync(path.join(env.userRoot, 'ann'));
    expect(folder.uid).toBeGreaterThanOrEqual(61000);
    expect(pod.spec!.securityContext).toEqual({
      runAsUser: folder.uid,
      runAsGroup: folder.gid,
      runAsNonRoot: true,
      fsGroup: folder.gid,
      seccompProfile: { type: 'RuntimeDefault' }
    });
    const container = pod.spec!.containers[0];
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] }
    });
    // A namespace enforcing `restricted` admits it (the rules applied here: no API server runs).
    expect(podSecurityViolations(pod.spec!, 'restricted')).toEqual([]);
    const argv = container.command!;
    expect(argv.slice(argv.indexOf('--owner-uid'))).toEqual([
      '--owner-uid',
      String(folder.uid)
    ]);
    expect(argv[argv.indexOf('--id') + 1]).toBe(`job-${id}`);
    expect(envOf(pod, 'HOME').value).toBe(
      realpathSync(path.join(env.userRoot, 'ann'))
    );
    expect(envOf(pod, 'USER').value).toBe('ann');
    // Her worker (and so her kernel, the same uid) holds a token for that worker and uid alone, in
    // a Secret of its own; the worker token is in neither.
    const secretName = `ferry-${id}-token`;
    expect(envOf(pod, 'FERRY_WORKER_TOKEN').valueFrom).toEqual({
      secretKeyRef: { name: secretName, key: 'token' }
    });
    const secret = standIn.get('secrets', NAMESPACE, secretName);
    expectValid(Secret, secret);
    expect(secret?.stringData).toEqual({
      token: jobWorkerToken(WORKER_TOKEN, `job-${id}`, folder.uid)
    });
    expect(JSON.stringify([pod, secret])).not.toContain(WORKER_TOKEN);

    // What her container would run, run here as her uid and gid with the pod's variables: her
    // worker registers with the job token, and her kernel runs as her, without any token.
    const variables: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      LANG: process.env.LANG
    };
    for (const variable of container.env ?? []) {
      variables[variable.name] = variable.valueFrom?.secretKeyRef
        ? (secret?.stringData as Record<string, string>).token
        : variable.value;
    }
    const [, ...args] = argv;
    const worker = spawn(process.execPath, [FERRY, ...args], {
      env: variables,
      cwd: path.join(env.userRoot, 'ann'),
      uid: pod.spec!.securityContext!.runAsUser!,
      gid: pod.spec!.securityContext!.runAsGroup!,
      stdio: ['ignore', 'ignore', 'pipe']
    });
    const exited = new Promise<number | null>(resolve =>
      worker.once('exit', code => resolve(code))
    );
    try {
      standIn.modify('pods', NAMESPACE, pod.metadata!.name!, it => {
        it.status = { phase: 'Running' };
      });
      const model = await pollUntil(
        async () => (await call(url, ann, 'GET', `/api/kernels/${id}`)).body,
        m => m.execution_state === 'idle' || m.execution_state === 'dead',
        30_000,
        100
      );
      expect(model).toMatchObject({ execution_state: 'idle' });
      const socket = await KernelSocket.connect({ url, token: '' }, id, {
        token: null,
        headers: { Cookie: ann.cookie }
      });
      const result = await socket.execute(
        "import os; print(os.getuid(), os.environ.get('FERRY_WORKER_TOKEN'))"
      );
      expect(result.stdout.trim()).toBe(`${folder.uid} None`);
      socket.close();
      // Her kernel's end deletes her pod and her token's Secret.
      expect(
        (await call(url, ann, 'DELETE', `/api/kernels/${id}`)).status
      ).toBe(204);
      await standIn.waitForCall(
        c =>
          c.method === 'DELETE' &&
          c.path === `/api/v1/namespaces/${NAMESPACE}/secrets/${secretName}`
      );
      expect(standIn.get('secrets', NAMESPACE, secretName)).toBeUndefined();
      // Her worker ran her one kernel (--once) and left when it was shut down.
      expect(await exited).toBe(0);
    } finally {
      worker.kill();
    }

    // The token's owner's pod: the image's (non-root) user, the namespace's worker token.
    const owners = await env.gateway.api('POST', '/api/kernels', {
      name: 'python3',
      accelerator: { offer: 'a100' }
    });
    expect(owners.status).toBe(201);
    const ownersPod = await postedPod(owners.body.id);
    expect(ownersPod.spec!.securityContext).toEqual({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' }
    });
    expect(ownersPod.spec!.containers[0].securityContext).toEqual({
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] }
    });
    expect(podSecurityViolations(ownersPod.spec!, 'restricted')).toEqual([]);
    expect(ownersPod.spec!.containers[0].command).not.toContain('--owner-uid');
    expect(envOf(ownersPod, 'FERRY_WORKER_TOKEN').valueFrom).toEqual({
      secretKeyRef: { name: 'ferry-worker-token', key: 'token' }
    });
    expect(
      standIn.get('secrets', NAMESPACE, 'ferry-worker-token')?.stringData
    ).toEqual({ token: WORKER_TOKEN });

    expect(
      (await env.gateway.api('DELETE', `/api/kernels/${owners.body.id}`)).status
    ).toBe(204);
  }, 60_000);
});
