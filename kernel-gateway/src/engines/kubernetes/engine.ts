import type {
  BatchV1Api,
  CoreV1Api,
  CoreV1Event,
  Informer,
  KubeConfig,
  KubernetesObject,
  ObjectCache,
  V1Pod
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  KUBERNETES_LABELS,
  workerManifests,
  workerObjectName,
  workerTokenSecret
} from './manifests';
import {
  jobWorkerId,
  ProvisionedJob,
  type IAcceleratorOffer,
  type IProvisionedJob,
  type IProvisioner,
  type JobState
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
 * provisioner writes once per namespace; manifests only name it. `@kubernetes/client-node` 1.x is an
 * ES module: it is loaded with `import()` on first use, so a gateway without Kubernetes offers never
 * loads it.
 */
export class KubernetesProvisioner implements IProvisioner {
  constructor(options: KubernetesProvisioner.IOptions) {
    this._options = options;
    this._log = options.logger.child({ engine: 'kubernetes' });
    this._client = Private.connect(options.kubeconfig);
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
    offer: IAcceleratorOffer
  ): Promise<IProvisionedJob> {
    if (!offer.kubernetes) {
      throw new Error(`offer ${offer.name} has no kubernetes section`);
    }
    const client = await this._client;
    const namespace = offer.kubernetes.namespace ?? this._namespace(client);
    await this._ensureSecret(client, namespace);
    await this._watch(client, namespace);
    const manifests = workerManifests({
      kernelId,
      offer,
      namespace,
      image: offer.kubernetes.image ?? this._options.image ?? '',
      workerCommand: this._options.workerCommand ?? ['ferry'],
      gateway: this._options.gateway(),
      secretName: this._secretName
    });
    const name = workerObjectName(kernelId);
    const job: Private.KubernetesJob = new Private.KubernetesJob(
      name,
      namespace,
      manifests.kind,
      jobWorkerId(kernelId),
      () => this._delete(job)
    );
    // Known before it exists: the watch may report the pod before the create call returns.
    this._jobs.set(Private.key(namespace, name), job);
    try {
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
      if (manifests.kind === 'Job') {
        await this._delete(job);
      }
      throw new Error(Private.apiError(error));
    }
    this._log.info(
      { kernel: kernelId, namespace, [manifests.kind.toLowerCase()]: name },
      `created a Kubernetes ${manifests.kind}`
    );
    this._refresh(job);
    return job;
  }

  dispose(): void {
    this._disposed = true;
    for (const timer of this._restarts) {
      clearTimeout(timer);
    }
    for (const watches of this._watches.values()) {
      void watches.then(informers =>
        informers.forEach(informer => void informer.stop())
      );
    }
    this._watches.clear();
    this._jobs.clear();
  }

  /** The namespace of offers that name none: the option, the kubeconfig context's, or `default`. */
  private _namespace(client: Private.IClient): string {
    return this._options.namespace ?? client.namespace ?? 'default';
  }

  private get _secretName(): string {
    return this._options.secretName ?? 'ferry-worker-token';
  }

  /** Write the worker token into the namespace's Secret (create, or replace a stale one), once. */
  private _ensureSecret(
    client: Private.IClient,
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
          if (Private.status(error) !== 409) {
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
              `cannot write the worker token Secret ${namespace}/${this._secretName}: ${Private.apiError(error)}`
            );
          }
        );
      this._secrets.set(namespace, written);
    }
    return written;
  }

  /** Follow the namespace's Ferry pods and its events (started once; restarted when a watch fails). */
  private _watch(
    client: Private.IClient,
    namespace: string
  ): Promise<Private.Watched[]> {
    let watches = this._watches.get(namespace);
    if (!watches) {
      const pods = client.informer<V1Pod>(
        `/api/v1/namespaces/${namespace}/pods`,
        () =>
          client.core.listNamespacedPod({
            namespace,
            labelSelector: `${KUBERNETES_LABELS.managedBy}=ferry`
          }),
        `${KUBERNETES_LABELS.managedBy}=ferry`
      );
      pods.on('add', pod => this._onPod(pod));
      pods.on('update', pod => this._onPod(pod));
      pods.on('delete', pod => this._onPod(pod, true));
      const events = client.informer<CoreV1Event>(
        `/api/v1/namespaces/${namespace}/events`,
        () => client.core.listNamespacedEvent({ namespace })
      );
      events.on('add', event => this._onEvent(event));
      events.on('update', event => this._onEvent(event));
      const informers = [pods, events];
      for (const informer of informers) {
        informer.on('error', error => this._restart(informer, error));
      }
      watches = Promise.all(informers.map(i => i.start())).then(
        () => informers
      );
      this._watches.set(namespace, watches);
    }
    return watches;
  }

  private _restart(informer: Private.Watched, error: unknown): void {
    if (this._disposed) {
      return;
    }
    this._log.warn(
      { err: Private.apiError(error) },
      'a Kubernetes watch failed; restarting it'
    );
    const timer = setTimeout(() => {
      this._restarts.delete(timer);
      if (!this._disposed) {
        void informer.start();
      }
    }, this._options.watchRetryMs ?? 2000);
    timer.unref();
    this._restarts.add(timer);
  }

  private _onPod(pod: V1Pod, deleted = false): void {
    const kernelId = pod.metadata?.labels?.[KUBERNETES_LABELS.kernel];
    const job =
      kernelId &&
      this._jobs.get(
        Private.key(pod.metadata?.namespace, workerObjectName(kernelId))
      );
    // Other hosts of a slice follow the kernel's host, which runs its worker.
    if (!job || !Private.isKernelHost(pod)) {
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
        const time = Private.eventTime(event);
        if (!job.event || time >= Private.eventTime(job.event)) {
          job.event = event;
          this._refresh(job);
        }
        return;
      }
    }
  }

  /** Work out the job's state from its pod and latest event; an ended job's objects are deleted. */
  private _refresh(job: Private.KubernetesJob): void {
    const state = Private.stateOf(job);
    if (state.state !== 'ended') {
      job.update(state);
      return;
    }
    this._jobs.delete(Private.key(job.namespace, job.id));
    this._log.info({ [job.kind.toLowerCase()]: job.id }, state.reason);
    job.update(state);
    if (!job.podDeleted || job.kind === 'Job') {
      void this._delete(job);
    }
  }

  /** Delete a job's objects (a pod; or a Job, its pods and its Service); gone already is fine. */
  private async _delete(job: Private.KubernetesJob): Promise<void> {
    const client = await this._client;
    const ignoreGone = (error: unknown) => {
      if (Private.status(error) !== 404) {
        this._log.warn(
          { [job.kind.toLowerCase()]: job.id, err: Private.apiError(error) },
          'could not delete'
        );
      }
    };
    const target = { name: job.id, namespace: job.namespace };
    if (job.kind === 'Pod') {
      await client.core.deleteNamespacedPod(target).catch(ignoreGone);
      return;
    }
    await Promise.all([
      client.batch
        .deleteNamespacedJob({ ...target, propagationPolicy: 'Background' })
        .catch(ignoreGone),
      client.core.deleteNamespacedService(target).catch(ignoreGone)
    ]);
  }

  private _options: KubernetesProvisioner.IOptions;
  private _log: Logger;
  private _client: Promise<Private.IClient>;
  private _jobs = new Map<string, Private.KubernetesJob>();
  private _secrets = new Map<string, Promise<void>>();
  private _watches = new Map<string, Promise<Private.Watched[]>>();
  private _restarts = new Set<NodeJS.Timeout>();
  private _disposed = false;
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
  }
}

namespace Private {
  /** A watch the provisioner keeps (pods or events of a namespace). */
  export type Watched = Informer<KubernetesObject>;

  /** The API clients, made from one kubeconfig. */
  export interface IClient {
    core: CoreV1Api;
    batch: BatchV1Api;
    /** The kubeconfig context's namespace (in a cluster: the pod's). */
    namespace: string | undefined;
    server: string | undefined;
    informer<T extends KubernetesObject>(
      path: string,
      list: () => Promise<{
        items: T[];
        metadata?: { resourceVersion?: string };
      }>,
      labelSelector?: string
    ): Informer<T> & ObjectCache<T>;
  }

  /** Load the client (an ES module, loaded on first use) and the kubeconfig. */
  export async function connect(file: string | undefined): Promise<IClient> {
    const k8s = await import('@kubernetes/client-node');
    const config: KubeConfig = new k8s.KubeConfig();
    if (file) {
      config.loadFromFile(file);
    } else {
      config.loadFromDefault();
    }
    const context = config.getContextObject(config.getCurrentContext());
    return {
      core: config.makeApiClient(k8s.CoreV1Api),
      batch: config.makeApiClient(k8s.BatchV1Api),
      namespace: context?.namespace,
      server: config.getCurrentCluster()?.server,
      informer: (path, list, labelSelector) =>
        k8s.makeInformer(config, path, list as never, labelSelector)
    };
  }

  export function key(namespace: string | undefined, name: string): string {
    return `${namespace ?? ''}/${name}`;
  }

  /** The HTTP status of a failed API call. */
  export function status(error: unknown): number | undefined {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'number' ? code : undefined;
  }

  /** A failed API call, for a person: the API server's own message when it gave one. */
  export function apiError(error: unknown): string {
    const body = (error as { body?: unknown }).body;
    if (typeof body === 'string') {
      try {
        const parsed = JSON.parse(body) as { message?: string };
        if (parsed.message) {
          return `${parsed.message} (HTTP ${status(error)})`;
        }
      } catch {
        // not a Status object
      }
    }
    return (error as Error).message ?? String(error);
  }

  /** Whether a pod runs the kernel's worker: the only pod, or host 0 of a slice. */
  export function isKernelHost(pod: V1Pod): boolean {
    const index = 'batch.kubernetes.io/job-completion-index';
    const value =
      pod.metadata?.labels?.[index] ?? pod.metadata?.annotations?.[index];
    return value === undefined || value === '0';
  }

  /** When an event last happened (its newest timestamp). */
  export function eventTime(event: CoreV1Event): number {
    const time =
      event.eventTime ??
      event.lastTimestamp ??
      event.firstTimestamp ??
      event.metadata.creationTimestamp;
    // Listed events carry Dates, watched ones the API's strings.
    return time ? new Date(time as Date | string).getTime() : 0;
  }

  /** A job's state, from its kernel's pod (as last seen) and the latest event about it. */
  export function stateOf(job: KubernetesJob): JobState {
    const pod = job.pod;
    const what = `Kubernetes ${job.kind === 'Pod' ? 'pod' : `job ${job.id}: pod`} ${pod?.metadata?.name ?? job.id}`;
    if (job.podDeleted) {
      return {
        state: 'ended',
        reason: `${what} was deleted`,
        completed: false
      };
    }
    const phase = pod?.status?.phase;
    if (phase === 'Running') {
      return { state: 'running' };
    }
    if (phase === 'Succeeded') {
      return { state: 'ended', reason: `${what} completed`, completed: true };
    }
    if (phase === 'Failed') {
      return {
        state: 'ended',
        reason: `${what} failed: ${failure(pod!)}`,
        completed: false
      };
    }
    const unscheduled = pod?.status?.conditions?.find(
      c => c.type === 'PodScheduled' && c.status === 'False'
    );
    return {
      state: 'pending',
      reason:
        job.event?.message ||
        unscheduled?.message ||
        (pod ? 'Pending' : 'Submitted')
    };
  }

  /** Why a pod failed: its own reason (Evicted ...) or how its worker container ended. */
  function failure(pod: V1Pod): string {
    if (pod.status?.reason || pod.status?.message) {
      return [pod.status.reason, pod.status.message].filter(Boolean).join(': ');
    }
    const ended = pod.status?.containerStatuses?.find(s => s.state?.terminated)
      ?.state?.terminated;
    if (ended) {
      return `its worker exited with code ${ended.exitCode}${ended.reason ? ` (${ended.reason})` : ''}`;
    }
    return 'no reason given';
  }

  /** One kernel's pod (or Job), as its provisioner last saw it. */
  export class KubernetesJob extends ProvisionedJob {
    constructor(
      readonly id: string,
      readonly namespace: string,
      readonly kind: 'Pod' | 'Job',
      readonly workerId: string,
      private readonly _cancel: () => Promise<void>
    ) {
      super();
    }

    readonly engine = 'kubernetes';
    readonly timeLimit = undefined;
    /** The pod that runs the kernel's worker, as last seen. */
    pod: V1Pod | undefined;
    podDeleted = false;
    /** The latest event about the pod or Job. */
    event: CoreV1Event | undefined;

    cancel(): Promise<void> {
      return this.state.state === 'ended' ? Promise.resolve() : this._cancel();
    }
  }
}
