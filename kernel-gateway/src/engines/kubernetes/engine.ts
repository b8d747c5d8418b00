/**
 * The Kubernetes engine's provisioner: a kernel's worker objects created, followed and deleted. The
 * API client is in client.ts, the watches in watch.ts, a job and its state in job.ts, the objects
 * themselves in manifests.ts.
 *
 * @packageDocumentation
 */
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  apiError,
  apiStatus,
  connectKubernetes,
  type IKubernetesClient
} from './client';
import type { IRunAs } from '../../protocol';
import { jobWorkerToken } from '../../protocol/job-token';
import { eventTime, isKernelHost, KubernetesJob, stateOf } from './job';
import {
  jobTokenSecretName,
  KUBERNETES_LABELS,
  workerManifests,
  workerObjectName,
  workerTokenSecret,
  type PodSecurityLevel
} from './manifests';
import { NamespaceWatches } from './watch';
import {
  jobWorkerId,
  type IAcceleratorOffer,
  type IEnvironmentProfile,
  type IProvisionedJob,
  type IProvisioner
} from '../types';

/**
 * Starts each kernel's worker in a Kubernetes pod (an Indexed Job and a headless Service for a
 * multi-host TPU slice) running `ferry worker --once`, which dials the gateway's worker port. One pod
 * watch and one event watch per namespace follow every kernel's pod: while it waits, the kernel is
 * queued with the latest event's message (`0/3 nodes are available: 3 Insufficient nvidia.com/gpu.`);
 * a pod that fails or is deleted outside Ferry ends the job with why. Cancelling deletes the pod.
 *
 * #### Notes
 * The worker token reaches pods through a Secret (`ferry-worker-token`, key `token`) that the
 * provisioner writes once per namespace; manifests only name it. A signed-in person's pod runs as
 * their uid (their kernel can read its worker's environment), so it never gets the worker token:
 * its own Secret (`ferry-<kernel id>-token`, deleted with the pod) holds a job token good for that
 * worker id and uid alone (protocol/job-token.ts), and its worker runs `--owner-uid`. `@kubernetes/client-node` 1.x is an
 * ES module: it is loaded with `import()` on first use, so a gateway without Kubernetes offers never
 * loads it.
 */
export class KubernetesProvisioner implements IProvisioner {
  constructor(options: KubernetesProvisioner.IOptions) {
    this._options = options;
    this._log = options.logger.child({ engine: 'kubernetes' });
    this._client = connectKubernetes(options.kubeconfig);
    this._watches = new NamespaceWatches({
      log: this._log,
      retryMs: options.watchRetryMs,
      onPod: (pod, deleted) => this._onPod(pod, deleted),
      onEvent: event => this._onEvent(event)
    });
    this._client.then(
      client =>
        this._log.info(
          { server: client.server, namespace: this._namespace(client) },
          'Kubernetes API server configured'
        ),
      error =>
        this._log.error(
          { err: (error as Error).message },
          'cannot configure the Kubernetes client: Kubernetes offers will fail'
        )
    );
  }

  readonly engine = 'kubernetes';

  async provision(
    kernelId: string,
    requested: IAcceleratorOffer,
    environment?: IEnvironmentProfile,
    runAs?: IRunAs
  ): Promise<IProvisionedJob> {
    if (!requested.kubernetes) {
      throw new Error(`offer ${requested.name} has no kubernetes section`);
    }
    // An environment's image wins over the offer's.
    const offer: IAcceleratorOffer = environment?.kubernetes
      ? {
          ...requested,
          kubernetes: {
            ...requested.kubernetes,
            image: environment.kubernetes.image
          }
        }
      : requested;
    const client = await this._client;
    const namespace = offer.kubernetes!.namespace ?? this._namespace(client);
    if (!runAs) {
      await this._ensureSecret(client, namespace);
    }
    await this._watches.watch(client, namespace);
    const manifests = workerManifests({
      kernelId,
      offer,
      namespace,
      image: offer.kubernetes!.image ?? this._options.image ?? '',
      workerCommand: this._options.workerCommand ?? ['ferry'],
      gateway: this._options.gateway(),
      secretName: runAs ? jobTokenSecretName(kernelId) : this._secretName,
      runAs,
      podSecurity: this._options.podSecurity
    });
    const name = workerObjectName(kernelId);
    const job: KubernetesJob = new KubernetesJob(
      name,
      namespace,
      manifests.kind,
      jobWorkerId(kernelId),
      () => this._delete(job),
      runAs ? jobTokenSecretName(kernelId) : undefined
    );
    // Known before it exists: the watch may report the pod before the create call returns.
    this._jobs.set(Private.key(namespace, name), job);
    try {
      if (runAs) {
        await client.core.createNamespacedSecret({
          namespace,
          body: workerTokenSecret(
            jobTokenSecretName(kernelId),
            namespace,
            jobWorkerToken(this._options.token, job.workerId, runAs.uid),
            kernelId
          )
        });
      }
      if (manifests.kind === 'Pod') {
        await client.core.createNamespacedPod({
          namespace,
          body: manifests.pod
        });
      } else {
        await client.core.createNamespacedService({
          namespace,
          body: manifests.service
        });
        await client.batch.createNamespacedJob({
          namespace,
          body: manifests.job
        });
      }
    } catch (error) {
      this._jobs.delete(Private.key(namespace, name));
      if (manifests.kind === 'Job' || job.secret) {
        await this._delete(job);
      }
      throw new Error(apiError(error));
    }
    this._log.info(
      { kernel: kernelId, namespace, [manifests.kind.toLowerCase()]: name },
      `created a Kubernetes ${manifests.kind}`
    );
    this._refresh(job);
    return job;
  }

  dispose(): void {
    this._watches.dispose();
    this._jobs.clear();
  }

  /** The namespace of offers that name none: the option, the kubeconfig context's, or `default`. */
  private _namespace(client: IKubernetesClient): string {
    return this._options.namespace ?? client.namespace ?? 'default';
  }

  private get _secretName(): string {
    return this._options.secretName ?? 'ferry-worker-token';
  }

  /** Write the worker token into the namespace's Secret (create, or replace a stale one), once. */
  private _ensureSecret(
    client: IKubernetesClient,
    namespace: string
  ): Promise<void> {
    let written = this._secrets.get(namespace);
    if (!written) {
      const body = workerTokenSecret(
        this._secretName,
        namespace,
        this._options.token
      );
      written = client.core
        .createNamespacedSecret({ namespace, body })
        .catch(error => {
          if (apiStatus(error) !== 409) {
            throw error;
          }
          return client.core.replaceNamespacedSecret({
            name: this._secretName,
            namespace,
            body
          });
        })
        .then(
          () => undefined,
          error => {
            this._secrets.delete(namespace);
            throw new Error(
              `cannot write the worker token Secret ${namespace}/${this._secretName}: ${apiError(error)}`
            );
          }
        );
      this._secrets.set(namespace, written);
    }
    return written;
  }

  private _onPod(pod: V1Pod, deleted = false): void {
    const kernelId = pod.metadata?.labels?.[KUBERNETES_LABELS.kernel];
    const job =
      kernelId &&
      this._jobs.get(
        Private.key(pod.metadata?.namespace, workerObjectName(kernelId))
      );
    // Other hosts of a slice follow the kernel's host, which runs its worker.
    if (!job || !isKernelHost(pod)) {
      return;
    }
    job.pod = pod;
    job.podDeleted = deleted;
    this._refresh(job);
  }

  private _onEvent(event: CoreV1Event): void {
    const involved = event.involvedObject;
    if (involved.kind !== 'Pod' && involved.kind !== 'Job') {
      return;
    }
    for (const job of this._jobs.values()) {
      const name = involved.name ?? '';
      if (
        involved.namespace === job.namespace &&
        (name === job.id || name.startsWith(`${job.id}-`))
      ) {
        const time = eventTime(event);
        if (!job.event || time >= eventTime(job.event)) {
          job.event = event;
          this._refresh(job);
        }
        return;
      }
    }
  }

  /** Work out the job's state from its pod and latest event; an ended job's objects are deleted. */
  private _refresh(job: KubernetesJob): void {
    const state = stateOf(job);
    if (state.state !== 'ended') {
      job.update(state);
      return;
    }
    this._jobs.delete(Private.key(job.namespace, job.id));
    this._log.info({ [job.kind.toLowerCase()]: job.id }, state.reason);
    job.update(state);
    if (!job.podDeleted || job.kind === 'Job' || job.secret) {
      void this._delete(job);
    }
  }

  /**
   * Delete a job's objects (a pod; or a Job, its pods and its Service; a person's token Secret);
   * gone already is fine.
   */
  private async _delete(job: KubernetesJob): Promise<void> {
    const client = await this._client;
    const ignoreGone = (error: unknown) => {
      if (apiStatus(error) !== 404) {
        this._log.warn(
          { [job.kind.toLowerCase()]: job.id, err: apiError(error) },
          'could not delete'
        );
      }
    };
    const target = { name: job.id, namespace: job.namespace };
    const secret = job.secret
      ? client.core
          .deleteNamespacedSecret({
            name: job.secret,
            namespace: job.namespace
          })
          .catch(ignoreGone)
      : undefined;
    if (job.kind === 'Pod') {
      await Promise.all([
        client.core.deleteNamespacedPod(target).catch(ignoreGone),
        secret
      ]);
      return;
    }
    await Promise.all([
      secret,
      client.batch
        .deleteNamespacedJob({ ...target, propagationPolicy: 'Background' })
        .catch(ignoreGone),
      client.core.deleteNamespacedService(target).catch(ignoreGone)
    ]);
  }

  private _options: KubernetesProvisioner.IOptions;
  private _log: Logger;
  private _client: Promise<IKubernetesClient>;
  private _watches: NamespaceWatches;
  private _jobs = new Map<string, KubernetesJob>();
  private _secrets = new Map<string, Promise<void>>();
}

export namespace KubernetesProvisioner {
  export interface IOptions {
    /** `host:port` of the gateway's worker endpoint as pods reach it (asked per pod). */
    gateway: () => string;
    /** The worker token; handed to pods through a Secret only. */
    token: string;
    logger: Logger;
    /**
     * A kubeconfig file; default: `KUBECONFIG`, `~/.kube/config`, or the pod's service account when
     * the gateway runs in the cluster.
     */
    kubeconfig?: string;
    /** The namespace of offers that name none (default: the kubeconfig context's, or `default`). */
    namespace?: string;
    /** The worker image of offers that name none. */
    image?: string;
    /** How the image runs `ferry` (default `['ferry']`). */
    workerCommand?: string[];
    /** The Secret the worker token is kept in (default `ferry-worker-token`). */
    secretName?: string;
    /** How long to wait before restarting a failed watch (default 2000 ms). */
    watchRetryMs?: number;
    /** The Pod Security Standard worker pods pass (default `restricted`). */
    podSecurity?: PodSecurityLevel;
  }
}

namespace Private {
  export function key(namespace: string | undefined, name: string): string {
    return `${namespace ?? ''}/${name}`;
  }
}
