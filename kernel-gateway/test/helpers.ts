/**
 * Test harness: a real gateway with a real embedded worker on port 0, a raw websocket client that
 * frames messages with JupyterLab's own serializer (so our framing is checked against theirs), and
 * Debian's jupyter_server 1.23 in front of a gateway.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  deserialize,
  serialize
} from '@jupyterlab/services/lib/kernel/serialize';
import type { KernelMessage } from '@jupyterlab/services';
import WebSocket from 'ws';
import {
  ApiSchemas,
  createGateway,
  createHeader,
  createLogger,
  V1_SUBPROTOCOL,
  Worker,
  type Gateway
} from '../src';

export type Message = KernelMessage.IMessage;

/** A gateway started for one test file. */
export interface ITestGateway {
  gateway: Gateway;
  worker: Worker;
  /** `http://127.0.0.1:<port>` */
  url: string;
  token: string;
  /** Call the REST API; `token: null` sends none. */
  api(
    method: string,
    path: string,
    body?: unknown,
    options?: IApiOptions
  ): Promise<IApiResponse>;
  close(): Promise<void>;
}

export interface IApiOptions {
  token?: string | null;
  /** Send this text as the body instead of JSON-encoding `body`. */
  raw?: string;
  headers?: Record<string, string>;
}

export interface IApiResponse {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  headers: Headers;
}

/** Start a gateway with an embedded worker; options override the defaults. */
export async function startGateway(
  options: Partial<Gateway.IOptions> & { worker?: Worker } = {}
): Promise<ITestGateway> {
  const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
  const worker =
    options.worker ??
    new Worker({
      logger,
      kernelTimings: { shutdownWaitMs: 2000 }
    });
  const token = options.token ?? randomUUID();
  const { worker: _embedded, ...gatewayOptions } = options;
  const gateway = createGateway({
    logger,
    version: 'test',
    ...gatewayOptions,
    workers: [worker],
    token
  });
  const address = await gateway.listen(0);
  const url = `http://127.0.0.1:${address.port}`;
  const api = apiFor(url, token);
  return { gateway, worker, url, token, api, close: () => gateway.close() };
}

/** A caller of the REST API of the server at `url` (Ferry, or jupyter_server in front of it). */
/** The longest a test's REST request waits for its answer. */
const API_TIMEOUT_MS = 120_000;

export function apiFor(url: string, token: string): ITestGateway['api'] {
  return async (method, path, body, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    const presented = opts.token === undefined ? token : opts.token;
    if (presented !== null) {
      headers.Authorization = `token ${presented}`;
    }
    let payload: string | undefined = opts.raw;
    if (payload === undefined && body !== undefined) {
      payload = JSON.stringify(body);
      headers['Content-Type'] = 'application/json';
    }
    // Bounded, so a request the gateway never answers fails here with its name, not as a test's
    // whole budget run out somewhere.
    const response = await fetch(url + path, {
      method,
      headers,
      body: payload,
      signal: AbortSignal.timeout(API_TIMEOUT_MS)
    }).catch((error: Error) => {
      throw new Error(`${method} ${path}: ${error.message}`);
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: keep the text
    }
    return { status: response.status, body: parsed, headers: response.headers };
  };
}

const schemas = new ApiSchemas();

/** Assert that `body` is a valid instance of the named schema of schema/openapi.yaml. */
export function expectSchema(name: string, body: unknown): void {
  const validate = schemas.validator(name);
  if (!validate(body)) {
    throw new Error(
      `not a valid ${name}: ${schemas.describe(validate)}\n${JSON.stringify(body)}`
    );
  }
}

/**
 * Ask `read` until `done` holds of its answer, as a polling client would (engines such as Slurm
 * tick on their own clock, with nothing to wait on); fails with the last answer after `timeoutMs`.
 */
export async function pollUntil<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 30_000,
  intervalMs = 250
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`gave up waiting; last: ${JSON.stringify(value)}`);
    }
    await new Promise(resolve => setTimeout(resolve, intervalMs));
  }
}

/**
 * `promise`, or a failure that names `what` it waited for once `timeoutMs` pass: a wait for an event
 * that never comes fails with its name, not as a test's whole budget run out somewhere.
 */
export async function awaitNamed<T>(
  what: string,
  promise: Promise<T>,
  timeoutMs = 30_000
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new Error(`waited ${timeoutMs / 1000} s for ${what} in vain`)),
      timeoutMs
    );
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** A kernel's model as a client reads it, checked against the REST contract. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function kernelModel(gw: ITestGateway, id: string): Promise<any> {
  const response = await gw.api('GET', `/api/kernels/${id}`);
  expect(response.status).toBe(200);
  expectSchema('Kernel', response.body);
  return response.body;
}

/** Start a kernel over REST and return its id. */
export async function startKernel(
  gw: Pick<ITestGateway, 'api'>,
  body: Record<string, unknown> = { name: 'python3' }
): Promise<string> {
  const response = await gw.api('POST', '/api/kernels', body);
  if (response.status !== 201) {
    throw new Error(
      `kernel start failed: ${response.status} ${JSON.stringify(response.body)}`
    );
  }
  return response.body.id;
}

/** The outcome of one `execute_request`. */
export interface IExecution {
  reply: Message;
  /** Every iopub message whose parent is the request, up to its idle status. */
  iopub: Message[];
  /** Text printed to stdout/stderr. */
  stdout: string;
  stderr: string;
}

/**
 * A websocket client of one kernel, speaking legacy or v1 framing with JupyterLab's serializer.
 */
export class KernelSocket {
  private constructor(
    readonly socket: WebSocket,
    readonly framing: 'legacy' | 'v1'
  ) {
    this.closed = new Promise(resolve =>
      socket.on('close', (code, reason) =>
        resolve({ code, reason: reason.toString() })
      )
    );
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      const protocol = framing === 'v1' ? V1_SUBPROTOCOL : '';
      const message = isBinary
        ? deserialize(
            data.buffer.slice(
              data.byteOffset,
              data.byteOffset + data.length
            ) as ArrayBuffer,
            protocol
          )
        : deserialize(
            data.toString('utf8') as unknown as ArrayBuffer,
            protocol
          );
      this.received.push(message);
      for (const waiter of [...this._waiters]) {
        if (waiter.predicate(message)) {
          this._waiters.delete(waiter);
          waiter.resolve(message);
        }
      }
    });
  }

  /** Open a websocket to a kernel's channels. */
  static async connect(
    gw: Pick<ITestGateway, 'url' | 'token'>,
    kernelId: string,
    options: {
      framing?: 'legacy' | 'v1';
      sessionId?: string;
      token?: string | null;
      /** More headers of the upgrade (a signed-in person's `Cookie`). */
      headers?: Record<string, string>;
    } = {}
  ): Promise<KernelSocket> {
    const framing = options.framing ?? 'legacy';
    const query = new URLSearchParams();
    if (options.sessionId) {
      query.set('session_id', options.sessionId);
    }
    const token = options.token === undefined ? gw.token : options.token;
    if (token !== null) {
      query.set('token', token);
    }
    const url = `${gw.url.replace('http', 'ws')}/api/kernels/${kernelId}/channels?${query}`;
    const socket = new WebSocket(
      url,
      framing === 'v1' ? [V1_SUBPROTOCOL] : [],
      {
        headers: options.headers
      }
    );
    const client = new KernelSocket(socket, framing);
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
      socket.once('unexpected-response', (_request, response) =>
        reject(new Error(`upgrade refused: ${response.statusCode}`))
      );
    });
    return client;
  }

  readonly closed: Promise<{ code: number; reason: string }>;
  /** Every message received, in order. */
  readonly received: Message[] = [];
  readonly session = randomUUID();

  /** Send a request on a channel and return its header's msg_id. */
  send(
    channel: 'shell' | 'control' | 'stdin',
    msgType: string,
    content: unknown
  ): string {
    const header = createHeader(msgType, this.session, 'test');
    const message = {
      channel,
      header,
      parent_header: {},
      metadata: {},
      content,
      buffers: []
    } as unknown as Message;
    this.socket.send(
      serialize(message, this.framing === 'v1' ? V1_SUBPROTOCOL : '')
    );
    return header.msg_id;
  }

  /** The first message (already received or still to come) that matches. */
  next(
    predicate: (message: Message) => boolean,
    timeoutMs = 30000
  ): Promise<Message> {
    const seen = this.received.find(predicate);
    if (seen) {
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const waiter = { predicate, resolve };
      this._waiters.add(waiter);
      setTimeout(() => {
        if (this._waiters.delete(waiter)) {
          reject(new Error(`no matching message within ${timeoutMs} ms`));
        }
      }, timeoutMs).unref();
    });
  }

  /** Run code and collect its reply and output. */
  async execute(
    code: string,
    options: { allowStdin?: boolean; onInput?: (prompt: string) => string } = {}
  ): Promise<IExecution> {
    const msgId = this.send('shell', 'execute_request', {
      code,
      silent: false,
      store_history: true,
      user_expressions: {},
      allow_stdin: options.allowStdin ?? false,
      stop_on_error: true
    });
    if (options.onInput) {
      const onInput = options.onInput;
      void this.next(
        m => m.header.msg_type === 'input_request' && parentOf(m) === msgId
      ).then(request =>
        this.send('stdin', 'input_reply', {
          value: onInput(
            String((request.content as { prompt?: string }).prompt ?? '')
          )
        })
      );
    }
    const reply = await this.next(
      m => m.header.msg_type === 'execute_reply' && parentOf(m) === msgId,
      60000
    );
    await this.next(
      m =>
        m.header.msg_type === 'status' &&
        parentOf(m) === msgId &&
        (m.content as { execution_state?: string }).execution_state === 'idle'
    );
    const iopub = this.received.filter(
      m => m.channel === 'iopub' && parentOf(m) === msgId
    );
    const text = (name: string) =>
      iopub
        .filter(
          m =>
            m.header.msg_type === 'stream' &&
            (m.content as { name: string }).name === name
        )
        .map(m => (m.content as { text: string }).text)
        .join('');
    return { reply, iopub, stdout: text('stdout'), stderr: text('stderr') };
  }

  close(): Promise<{ code: number; reason: string }> {
    this.socket.close();
    return this.closed;
  }

  private _waiters = new Set<{
    predicate: (message: Message) => boolean;
    resolve: (message: Message) => void;
  }>();
}

/** Whether a message is an iopub status with this execution state. */
export function isStatus(message: Message, state: string): boolean {
  return (
    message.header.msg_type === 'status' &&
    (message.content as { execution_state?: string }).execution_state === state
  );
}

/** The msg_id of a message's parent. */
export function parentOf(message: Message): string | undefined {
  return (message.parent_header as { msg_id?: string }).msg_id;
}

/** Whether a process runs (a zombie waiting for a reaper that never comes does not count). */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** A port nobody listens on right now (jupyter_server 1.23 cannot report a port it picked itself). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise(resolve => server.close(resolve));
  return port;
}

/** Debian's jupyter_server 1.23 running with `--gateway-url` in front of a gateway. */
export interface IJupyterServer {
  /** jupyter_server, seen through the same REST helper with its own URL and token. */
  server: ITestGateway;
  child: ChildProcess;
  /** What it printed on stderr so far. */
  stderr(): string;
  /** Stop it (SIGTERM, SIGKILL after 10 s), wait until it has exited, and remove its files. */
  stop(): Promise<void>;
}

/**
 * Start Debian's jupyter_server 1.23 with `--gateway-url` pointing at `ferry`, in a directory of its
 * own, and resolve once it answers.
 *
 * @param env - More of its environment (it sends its own `KERNEL_*` variables with every start).
 */
export async function startJupyterServer(
  ferry: ITestGateway,
  env: Record<string, string> = {}
): Promise<IJupyterServer> {
  const rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-jupyter-server-'));
  const port = await freePort();
  const token = randomUUID();
  const child = spawn(
    '/usr/bin/python3',
    [
      '-m',
      'jupyter_server',
      `--gateway-url=${ferry.url}`,
      `--GatewayClient.auth_token=${ferry.token}`,
      '--ServerApp.ip=127.0.0.1',
      `--ServerApp.port=${port}`,
      '--ServerApp.port_retries=0',
      `--ServerApp.token=${token}`,
      `--ServerApp.root_dir=${rootDir}`,
      '--ServerApp.open_browser=False',
      '--no-browser',
      '--allow-root'
    ],
    {
      env: {
        ...process.env,
        JUPYTER_CONFIG_DIR: path.join(rootDir, '.config'),
        JUPYTER_RUNTIME_DIR: path.join(rootDir, '.runtime'),
        JUPYTER_DATA_DIR: path.join(rootDir, '.data'),
        ...env
      },
      stdio: ['ignore', 'ignore', 'pipe']
    }
  );
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>(resolve => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10000);
      await exited;
      clearTimeout(killer);
    }
    rmSync(rootDir, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${port}`;
  const server = { ...ferry, url, token, api: apiFor(url, token) };
  const deadline = Date.now() + 30000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`jupyter_server exited early:\n${stderr}`);
    }
    try {
      if ((await server.api('GET', '/api')).status === 200) {
        break;
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`jupyter_server did not answer within 30 s:\n${stderr}`);
    }
    await new Promise(resolve => setTimeout(resolve, 100));
  }
  return { server, child, stderr: () => stderr, stop };
}

/**
 * Open a websocket to a kernel through jupyter_server and wait until the kernel answers on it.
 *
 * jupyter_server 1.23's gateway proxy opens its own websocket to Ferry only after the browser's is
 * open. A message the browser sends before the proxy has even begun connecting waits on a future that
 * is then replaced and never resolves: it is dropped without a word (seen here in about one connection
 * in six). A browser copes by repeating `kernel_info_request` until a reply comes; so does this.
 */
export async function connectThrough(
  server: ITestGateway,
  kernelId: string
): Promise<KernelSocket> {
  const client = await KernelSocket.connect(server, kernelId, {
    sessionId: randomUUID()
  });
  const sent = new Set<string>();
  const ask = () => sent.add(client.send('shell', 'kernel_info_request', {}));
  ask();
  const retry = setInterval(ask, 500);
  try {
    const reply = await client.next(
      m =>
        m.header.msg_type === 'kernel_info_reply' &&
        sent.has(parentOf(m) ?? ''),
      20000
    );
    expect(reply.content).toMatchObject({ status: 'ok' });
  } finally {
    clearInterval(retry);
  }
  return client;
}
