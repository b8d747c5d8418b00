/**
 * A loopback stand-in for the Kubernetes API server, for tests: a real HTTP server that keeps objects
 * in memory and serves the few endpoints Ferry's Kubernetes client calls (create, get, list, replace,
 * delete, and `?watch=true` streams of JSON lines) for pods, events, secrets, services and jobs. It
 * schedules nothing and runs nothing: the test plays the scheduler and the kubelet by changing objects.
 */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse
} from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';

/** An object as the API server stores it. */
export interface IObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** One call the stand-in answered. */
export interface IApiCall {
  method: string;
  path: string;
  query: URLSearchParams;
  body: IObject | undefined;
}

export class KubernetesStandIn {
  private constructor(
    private readonly _server: Server,
    readonly token: string
  ) {}

  /** Listen on a free loopback port; every call must carry `Bearer <token>`. */
  static async start(): Promise<KubernetesStandIn> {
    const server = createServer();
    const standIn = new KubernetesStandIn(server, randomUUID());
    server.on('request', (request, response) =>
      standIn._handle(request, response)
    );
    await new Promise<void>(resolve =>
      server.listen(0, '127.0.0.1', () => resolve())
    );
    return standIn;
  }

  get url(): string {
    return `http://127.0.0.1:${(this._server.address() as AddressInfo).port}`;
  }

  /** Every call answered so far (watches included, once each). */
  readonly calls: IApiCall[] = [];

  /** Write a kubeconfig for this server into `dir`; return its path. */
  async writeKubeconfig(dir: string, namespace: string): Promise<string> {
    const file = path.join(dir, 'kubeconfig.yaml');
    await fs.writeFile(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        `  - name: stand-in`,
        // Plain HTTP on loopback: the client allows it only without TLS verification.
        `    cluster: { server: '${this.url}', insecure-skip-tls-verify: true }`,
        'users:',
        `  - name: ferry`,
        `    user: { token: '${this.token}' }`,
        'contexts:',
        `  - name: stand-in`,
        `    context: { cluster: stand-in, user: ferry, namespace: ${namespace} }`,
        'current-context: stand-in'
      ].join('\n')
    );
    return file;
  }

  /** The stored object, if any. */
  get(resource: string, namespace: string, name: string): IObject | undefined {
    return this._collection(resource, namespace).get(name);
  }

  /** Every stored object of a kind in a namespace. */
  list(resource: string, namespace: string): IObject[] {
    return [...this._collection(resource, namespace).values()];
  }

  /** Change a stored object as a controller would (the kubelet setting a pod's status). */
  modify(
    resource: string,
    namespace: string,
    name: string,
    change: (object: IObject) => void
  ): void {
    const object = this.get(resource, namespace, name);
    if (!object) {
      throw new Error(`no ${resource} ${namespace}/${name}`);
    }
    change(object);
    this._store(resource, namespace, object, 'MODIFIED');
  }

  /** Create an object as a controller would (a Job's pods, an event). */
  add(resource: string, namespace: string, object: IObject): void {
    this._store(resource, namespace, object, 'ADDED');
  }

  /** Delete an object as someone else would (`kubectl delete pod`). */
  remove(resource: string, namespace: string, name: string): void {
    const collection = this._collection(resource, namespace);
    const object = collection.get(name);
    if (object) {
      collection.delete(name);
      this._emit(resource, namespace, 'DELETED', object);
    }
  }

  /** Record an event about an object, as the scheduler or the kubelet would. */
  event(
    namespace: string,
    involved: { kind: string; name: string },
    reason: string,
    message: string,
    type: 'Normal' | 'Warning' = 'Warning'
  ): void {
    const now = new Date(Date.now() + this._clock++).toISOString();
    this.add('events', namespace, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${involved.name}.${randomUUID().slice(0, 8)}` },
      involvedObject: { ...involved, namespace },
      reason,
      message,
      type,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1
    });
  }

  /** Resolve with the first call (past or future) that `match` accepts. */
  waitForCall(match: (call: IApiCall) => boolean): Promise<IApiCall> {
    const found = this.calls.find(match);
    if (found) {
      return Promise.resolve(found);
    }
    return new Promise(resolve => this._callWaiters.push({ match, resolve }));
  }

  /** Close every watch and stop listening. */
  async close(): Promise<void> {
    for (const watch of this._watches) {
      watch.response.end();
    }
    this._watches.clear();
    await new Promise<void>(resolve => {
      this._server.close(() => resolve());
      this._server.closeAllConnections();
    });
  }

  private async _handle(
    request: IncomingMessage,
    response: ServerResponse
  ): Promise<void> {
    const url = new URL(request.url ?? '/', this.url);
    let text = '';
    for await (const chunk of request) {
      text += chunk;
    }
    const body = text ? (JSON.parse(text) as IObject) : undefined;
    const call = {
      method: request.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      body
    };
    this.calls.push(call);
    this._callWaiters = this._callWaiters.filter(waiter => {
      if (waiter.match(call)) {
        waiter.resolve(call);
        return false;
      }
      return true;
    });
    if (request.headers.authorization !== `Bearer ${this.token}`) {
      return this._status(response, 401, 'Unauthorized', 'Unauthorized');
    }
    // /api/v1/namespaces/NS/RESOURCE[/NAME] and /apis/GROUP/VERSION/namespaces/NS/RESOURCE[/NAME]
    const match =
      /^\/(?:api\/v1|apis\/[^/]+\/[^/]+)\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?$/.exec(
        url.pathname
      );
    if (!match) {
      return this._status(
        response,
        404,
        'NotFound',
        `no route ${url.pathname}`
      );
    }
    const [, namespace, resource, name] = match;
    const collection = this._collection(resource, namespace);
    const method = call.method;
    if (method === 'GET' && !name && url.searchParams.get('watch') === 'true') {
      return this._watch(resource, namespace, url.searchParams, response);
    }
    if (method === 'GET' && !name) {
      const selector = url.searchParams.get('labelSelector');
      return this._json(response, 200, {
        apiVersion: 'v1',
        kind: 'List',
        metadata: { resourceVersion: String(this._version) },
        items: [...collection.values()].filter(o => selects(selector, o))
      });
    }
    if (method === 'POST' && !name && body) {
      if (collection.has(body.metadata.name)) {
        return this._status(
          response,
          409,
          'AlreadyExists',
          `${resource} "${body.metadata.name}" already exists`
        );
      }
      if (resource === 'pods') {
        body.status = { phase: 'Pending' };
      }
      body.metadata.uid = randomUUID();
      body.metadata.creationTimestamp = new Date().toISOString();
      return this._json(
        response,
        201,
        this._store(resource, namespace, body, 'ADDED')
      );
    }
    const existing = name ? collection.get(name) : undefined;
    if (!existing) {
      return this._status(
        response,
        404,
        'NotFound',
        `${resource} "${name}" not found`
      );
    }
    if (method === 'GET') {
      return this._json(response, 200, existing);
    }
    if (method === 'PUT' && body) {
      return this._json(
        response,
        200,
        this._store(resource, namespace, body, 'MODIFIED')
      );
    }
    if (method === 'DELETE') {
      this.remove(resource, namespace, name);
      return this._json(response, 200, existing);
    }
    return this._status(response, 405, 'MethodNotAllowed', method);
  }

  private _watch(
    resource: string,
    namespace: string,
    query: URLSearchParams,
    response: ServerResponse
  ): void {
    const since = Number(query.get('resourceVersion') || 0);
    const watch = {
      resource,
      namespace,
      selector: query.get('labelSelector'),
      response
    };
    response.writeHead(200, { 'Content-Type': 'application/json' });
    response.flushHeaders();
    for (const change of this._history) {
      if (change.version > since) {
        this._send(
          watch,
          change.type,
          change.resource,
          change.namespace,
          change.object
        );
      }
    }
    this._watches.add(watch);
    response.on('close', () => this._watches.delete(watch));
  }

  private _send(
    watch: KubernetesStandIn.IWatch,
    type: string,
    resource: string,
    namespace: string,
    object: IObject
  ): void {
    if (
      watch.resource === resource &&
      watch.namespace === namespace &&
      selects(watch.selector, object)
    ) {
      watch.response.write(`${JSON.stringify({ type, object })}\n`);
    }
  }

  private _store(
    resource: string,
    namespace: string,
    object: IObject,
    type: 'ADDED' | 'MODIFIED'
  ): IObject {
    object.metadata.namespace = namespace;
    object.metadata.resourceVersion = String(++this._version);
    this._collection(resource, namespace).set(object.metadata.name, object);
    this._emit(resource, namespace, type, object);
    return object;
  }

  private _emit(
    resource: string,
    namespace: string,
    type: string,
    object: IObject
  ): void {
    const copy = JSON.parse(JSON.stringify(object)) as IObject;
    this._history.push({
      version: this._version,
      type,
      resource,
      namespace,
      object: copy
    });
    for (const watch of this._watches) {
      this._send(watch, type, resource, namespace, copy);
    }
  }

  private _collection(
    resource: string,
    namespace: string
  ): Map<string, IObject> {
    const key = `${namespace}/${resource}`;
    let collection = this._objects.get(key);
    if (!collection) {
      collection = new Map();
      this._objects.set(key, collection);
    }
    return collection;
  }

  private _json(response: ServerResponse, status: number, body: unknown): void {
    response.writeHead(status, { 'Content-Type': 'application/json' });
    response.end(JSON.stringify(body));
  }

  private _status(
    response: ServerResponse,
    code: number,
    reason: string,
    message: string
  ): void {
    this._json(response, code, {
      apiVersion: 'v1',
      kind: 'Status',
      status: 'Failure',
      reason,
      message,
      code
    });
  }

  private _objects = new Map<string, Map<string, IObject>>();
  private _history: {
    version: number;
    type: string;
    resource: string;
    namespace: string;
    object: IObject;
  }[] = [];
  private _watches = new Set<KubernetesStandIn.IWatch>();
  private _callWaiters: {
    match: (call: IApiCall) => boolean;
    resolve: (call: IApiCall) => void;
  }[] = [];
  private _version = 0;
  private _clock = 0;
}

export namespace KubernetesStandIn {
  export interface IWatch {
    resource: string;
    namespace: string;
    selector: string | null;
    response: ServerResponse;
  }
}

/** Whether an equality-based label selector (`a=b,c=d`) selects an object. */
function selects(selector: string | null, object: IObject): boolean {
  if (!selector) {
    return true;
  }
  return selector.split(',').every(term => {
    const [key, value] = term.split('=');
    return object.metadata.labels?.[key] === value;
  });
}
