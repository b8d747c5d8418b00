/**
 * The Kubernetes API as the engine uses it: core and batch clients and watches made from one
 * kubeconfig (`@kubernetes/client-node`, an ES module, loaded on first use), and what a failed call
 * says.
 *
 * @packageDocumentation
 */
import type {
  BatchV1Api,
  CoreV1Api,
  Informer,
  KubeConfig,
  KubernetesObject,
  ObjectCache
} from '@kubernetes/client-node';

/** The API clients, made from one kubeconfig. */
export interface IKubernetesClient {
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

/**
 * Load the client (an ES module, loaded on first use) and the kubeconfig.
 *
 * @param file - a kubeconfig file; default: `KUBECONFIG`, `~/.kube/config`, or the pod's service
 * account in a cluster.
 */
export async function connectKubernetes(
  file: string | undefined
): Promise<IKubernetesClient> {
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

/** The HTTP status of a failed API call. */
export function apiStatus(error: unknown): number | undefined {
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
        return `${parsed.message} (HTTP ${apiStatus(error)})`;
      }
    } catch {
      // not a Status object
    }
  }
  return (error as Error).message ?? String(error);
}
