import type {
  V1EnvVar,
  V1Job,
  V1SecurityContext,
  V1ObjectMeta,
  V1Pod,
  V1PodSecurityContext,
  V1PodSpec,
  V1Secret,
  V1Service
} from '@kubernetes/client-node';
import type { IRunAs } from '../../protocol';
import { jobWorkerId, type IAcceleratorOffer } from '../types';

/** The labels every object Ferry creates carries; the pod watch selects on the first. */
export const KUBERNETES_LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  component: 'app.kubernetes.io/component',
  kernel: 'ferry.dev/kernel'
} as const;

/** The node label GKE puts the TPU slice topology in. */
export const GKE_TPU_TOPOLOGY = 'cloud.google.com/gke-tpu-topology';

/**
 * The Pod Security Standard a worker pod is built to pass: `restricted` (the default) or, where an
 * operator must relax it, `baseline`.
 */
export type PodSecurityLevel = 'restricted' | 'baseline';

/** What a kernel's worker objects are built from: the kernel, its offer and the gateway's settings. */
export interface IWorkerManifestOptions {
  kernelId: string;
  offer: IAcceleratorOffer;
  namespace: string;
  /** The worker image when the offer names none. */
  image: string;
  /** How the image runs `ferry` (`['ferry']`). */
  workerCommand: string[];
  /** `host:port` of the gateway's worker endpoint as pods reach it. */
  gateway: string;
  /** The Secret holding the worker token under `token` (a person's pod: their job token's). */
  secretName: string;
  /**
   * The signed-in person the kernel is for (undefined: the token's owner): their pod runs as their
   * uid and gid, and its worker (`--owner-uid`) takes their kernels only.
   */
  runAs?: IRunAs;
  /**
   * The Pod Security Standard its pods pass (default `restricted`). `baseline` leaves the token
   * owner's pod to the image's user and drops the seccomp profile and the capability drop; a
   * person's pod still runs as them, never root, without privilege escalation.
   */
  podSecurity?: PodSecurityLevel;
}

/** A kernel's worker as Kubernetes objects: one pod, or an Indexed Job with its headless Service. */
export type WorkerManifests =
  { kind: 'Pod'; pod: V1Pod } | { kind: 'Job'; job: V1Job; service: V1Service };

/** The name of a kernel's pod, or of its Job and headless Service (a DNS label: kernel ids are UUIDs). */
export function workerObjectName(kernelId: string): string {
  return `ferry-${kernelId}`;
}

/** The Secret that holds the job token of a person's pod (one per kernel, deleted with it). */
export function jobTokenSecretName(kernelId: string): string {
  return `${workerObjectName(kernelId)}-token`;
}

/**
 * Build the objects that run a kernel's worker: a pod (`restartPolicy: Never`) that runs
 * `ferry worker --once` with the offer's limits, node selectors and tolerations; for an offer of
 * several hosts (a multi-host TPU slice), an Indexed Job of that many pods and the headless Service
 * that gives them stable host names (GKE sets `TPU_WORKER_ID` and `TPU_WORKER_HOSTNAMES` from it).
 *
 * Every pod passes the Pod Security Standard `restricted` unless `podSecurity` says `baseline`:
 * never root (the token owner's pod: the image's numeric non-root user), the runtime's default
 * seccomp profile, no privilege escalation and every capability dropped. A signed-in person's pod
 * runs as them (their uid and gid, `fsGroup` their gid) and its worker runs `--owner-uid <uid>`.
 *
 * #### Notes
 * The worker token never appears in a manifest: the pod reads it from a Secret (a person's pod,
 * from its own Secret holding its job token).
 */
export function workerManifests(
  options: IWorkerManifestOptions
): WorkerManifests {
  const name = workerObjectName(options.kernelId);
  const hosts = options.offer.kubernetes?.hosts ?? 1;
  const metadata = Private.metadata(options, name);
  if (hosts === 1) {
    return {
      kind: 'Pod',
      pod: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata,
        spec: Private.podSpec(options, Private.workerArgv(options))
      }
    };
  }
  const spec = Private.podSpec(options, Private.hostArgv(options));
  return {
    kind: 'Job',
    job: {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata,
      spec: {
        completionMode: 'Indexed',
        completions: hosts,
        parallelism: hosts,
        // One host failing ends the slice: no retries, the kernel is reported dead.
        backoffLimit: 0,
        template: {
          metadata: { labels: metadata.labels },
          spec: { ...spec, subdomain: name }
        }
      }
    },
    service: {
      apiVersion: 'v1',
      kind: 'Service',
      metadata,
      spec: {
        clusterIP: 'None',
        selector: { [KUBERNETES_LABELS.kernel]: options.kernelId },
        // Hosts find each other while they start, before any is ready.
        publishNotReadyAddresses: true
      }
    }
  };
}

/**
 * The Secret the worker pods of a namespace read the worker token from, or (with `kernelId`) the
 * one a person's pod reads its job token from.
 */
export function workerTokenSecret(
  name: string,
  namespace: string,
  token: string,
  kernelId?: string
): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace,
      labels: {
        [KUBERNETES_LABELS.managedBy]: 'ferry',
        [KUBERNETES_LABELS.component]: 'worker-token',
        ...(kernelId ? { [KUBERNETES_LABELS.kernel]: kernelId } : {})
      }
    },
    type: 'Opaque',
    stringData: { token }
  };
}

namespace Private {
  export function metadata(
    options: IWorkerManifestOptions,
    name: string
  ): V1ObjectMeta {
    return {
      name,
      namespace: options.namespace,
      labels: {
        [KUBERNETES_LABELS.managedBy]: 'ferry',
        [KUBERNETES_LABELS.component]: 'worker',
        [KUBERNETES_LABELS.kernel]: options.kernelId
      },
      annotations: { 'ferry.dev/offer': options.offer.name }
    };
  }

  /** `ferry worker --once` for this kernel, offering the devices of the pod's allocation. */
  export function workerArgv(options: IWorkerManifestOptions): string[] {
    const { accelerator } = options.offer;
    return [
      ...options.workerCommand,
      'worker',
      '--once',
      '--id',
      jobWorkerId(options.kernelId),
      '--name',
      `${options.offer.name} (Kubernetes)`,
      '--gateway',
      options.gateway,
      '--no-cpu',
      '--allocated',
      `${accelerator.kind}${accelerator.model ? `:${accelerator.model}` : ''}`,
      ...(options.runAs ? ['--owner-uid', String(options.runAs.uid)] : [])
    ];
  }

  /**
   * The pod's security context: a person's uid and gid (files it makes, volumes it mounts); never
   * root; under `restricted` the container runtime's default seccomp profile.
   */
  export function podSecurityContext(
    options: IWorkerManifestOptions
  ): V1PodSecurityContext | undefined {
    const { runAs } = options;
    const restricted = (options.podSecurity ?? 'restricted') === 'restricted';
    if (!runAs && !restricted) {
      return undefined;
    }
    return {
      ...(runAs ? { runAsUser: runAs.uid, runAsGroup: runAs.gid } : {}),
      runAsNonRoot: true,
      ...(runAs ? { fsGroup: runAs.gid } : {}),
      ...(restricted ? { seccompProfile: { type: 'RuntimeDefault' } } : {})
    };
  }

  /**
   * Each container's security context: no privilege escalation (setuid files, file capabilities)
   * and, under `restricted`, no capabilities at all. Ferry's containers need none: device plugins
   * hand a pod its GPUs or TPUs through the container runtime, not through privileges.
   */
  export function containerSecurityContext(
    options: IWorkerManifestOptions
  ): V1SecurityContext | undefined {
    if ((options.podSecurity ?? 'restricted') === 'restricted') {
      return {
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] }
      };
    }
    return options.runAs ? { allowPrivilegeEscalation: false } : undefined;
  }

  /**
   * What each host of a slice runs: host 0 the kernel's worker, the others the offer's follower
   * command (without the worker token), or nothing but holding their chips.
   */
  export function hostArgv(options: IWorkerManifestOptions): string[] {
    const follower = options.offer.kubernetes?.followerCommand;
    const script =
      'if [ "$JOB_COMPLETION_INDEX" = 0 ]; then exec "$@"; fi; unset FERRY_WORKER_TOKEN; ' +
      `exec ${follower ?? 'sleep infinity'}`;
    return ['/bin/sh', '-c', script, 'ferry-host', ...workerArgv(options)];
  }

  export function podSpec(
    options: IWorkerManifestOptions,
    argv: string[]
  ): V1PodSpec {
    const kubernetes = options.offer.kubernetes ?? {};
    const { kind, count } = options.offer.accelerator;
    const visible = Array.from({ length: count }, (_, i) => String(i)).join(
      ','
    );
    const env: V1EnvVar[] = [
      {
        name: 'FERRY_WORKER_TOKEN',
        valueFrom: {
          secretKeyRef: { name: options.secretName, key: 'token' }
        }
      },
      // The container sees only its own devices, numbered from 0: the worker offers exactly these.
      {
        name: kind === 'tpu' ? 'TPU_VISIBLE_CHIPS' : 'CUDA_VISIBLE_DEVICES',
        value: visible
      },
      { name: 'KERNEL_ID', value: options.kernelId },
      // A person's worker goes by their name and folder, as their Slurm jobs do.
      ...(options.runAs
        ? [
            { name: 'HOME', value: options.runAs.home },
            { name: 'USER', value: options.runAs.user },
            { name: 'LOGNAME', value: options.runAs.user }
          ]
        : [])
    ];
    const nodeSelector = {
      ...kubernetes.nodeSelector,
      ...(kubernetes.topology
        ? { [GKE_TPU_TOPOLOGY]: kubernetes.topology }
        : {})
    };
    const limits = Object.fromEntries(
      Object.entries(kubernetes.limits ?? {}).map(([k, v]) => [k, String(v)])
    );
    const pod = podSecurityContext(options);
    const container = containerSecurityContext(options);
    return {
      restartPolicy: 'Never',
      // The worker needs no access to the Kubernetes API.
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      containers: [
        {
          name: 'worker',
          image: kubernetes.image ?? options.image,
          command: argv,
          env,
          resources: Object.keys(limits).length ? { limits } : undefined,
          ...(container ? { securityContext: container } : {})
        }
      ],
      ...(pod ? { securityContext: pod } : {}),
      ...(Object.keys(nodeSelector).length ? { nodeSelector } : {}),
      ...(kubernetes.tolerations?.length
        ? { tolerations: kubernetes.tolerations }
        : {})
    };
  }
}
