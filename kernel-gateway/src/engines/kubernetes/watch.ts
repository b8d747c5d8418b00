/**
 * The engine's watches: per namespace, one on Ferry's pods and one on its events, started on first
 * use and restarted when they fail, until the engine is disposed.
 *
 * @packageDocumentation
 */
import type {
  CoreV1Event,
  Informer,
  KubernetesObject,
  V1Pod
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiError, type IKubernetesClient } from './client';
import { KUBERNETES_LABELS } from './manifests';

/** A watch the engine keeps (pods or events of a namespace). */
export type Watched = Informer<KubernetesObject>;

/** The pod and event watches of the namespaces the engine has used. */
export class NamespaceWatches {
  constructor(options: NamespaceWatches.IOptions) {
    this._options = options;
  }

  /** Follow the namespace's Ferry pods and its events (started once; restarted when a watch fails). */
  watch(client: IKubernetesClient, namespace: string): Promise<Watched[]> {
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
      pods.on('add', pod => this._options.onPod(pod));
      pods.on('update', pod => this._options.onPod(pod));
      pods.on('delete', pod => this._options.onPod(pod, true));
      const events = client.informer<CoreV1Event>(
        `/api/v1/namespaces/${namespace}/events`,
        () => client.core.listNamespacedEvent({ namespace })
      );
      events.on('add', event => this._options.onEvent(event));
      events.on('update', event => this._options.onEvent(event));
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

  /** Stop every watch, and any restart still to come. */
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
  }

  private _restart(informer: Watched, error: unknown): void {
    if (this._disposed) {
      return;
    }
    this._options.log.warn(
      { err: apiError(error) },
      'a Kubernetes watch failed; restarting it'
    );
    const timer = setTimeout(() => {
      this._restarts.delete(timer);
      if (!this._disposed) {
        void informer.start();
      }
    }, this._options.retryMs ?? 2000);
    timer.unref();
    this._restarts.add(timer);
  }

  private _options: NamespaceWatches.IOptions;
  private _watches = new Map<string, Promise<Watched[]>>();
  private _restarts = new Set<NodeJS.Timeout>();
  private _disposed = false;
}

export namespace NamespaceWatches {
  export interface IOptions {
    log: Logger;
    /** How long to wait before restarting a failed watch (default 2000 ms). */
    retryMs?: number;
    /** A Ferry pod was added, changed or (`deleted`) deleted. */
    onPod: (pod: V1Pod, deleted?: boolean) => void;
    /** An event in the namespace was added or changed. */
    onEvent: (event: CoreV1Event) => void;
  }
}
