/**
 * Ferry against @jupyterlab/services, the client JupyterLab itself uses: kernelspecs, kernels (under
 * both websocket framings) and sessions, driven through its managers as JupyterLab drives them.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  KernelManager,
  KernelMessage,
  KernelSpecManager,
  ServerConnection,
  SessionManager,
  type Kernel,
  type Session
} from '@jupyterlab/services';
import type { ISignal } from '@lumino/signaling';
import WebSocket from 'ws';
import { V1_SUBPROTOCOL } from '../src';
import { startGateway, type ITestGateway } from './helpers';

/** A websocket @jupyterlab/services opened: its URL, the subprotocols offered, the frames received. */
interface IOpenedSocket {
  url: string;
  offered: string[];
  socket: WebSocket;
  frames: ('text' | 'binary')[];
}

const opened: IOpenedSocket[] = [];

/** `ws`, recording every socket the client opens so tests can see what was negotiated. */
class RecordingWebSocket extends WebSocket {
  constructor(url: string, protocols: string | string[] = []) {
    super(url, protocols);
    const record: IOpenedSocket = {
      url,
      offered: [protocols].flat(),
      socket: this,
      frames: []
    };
    this.on('message', (_data, isBinary) =>
      record.frames.push(isBinary ? 'binary' : 'text')
    );
    opened.push(record);
  }
}

/**
 * A client that offers no subprotocol, as JupyterLab 3 and jupyter_server's gateway client do.
 * @jupyterlab/services 7 has no setting for this: KernelConnection always offers every entry of
 * `KernelMessage.supportedKernelWebSocketProtocols` (its private `_supportedProtocols`) as the second
 * argument of `new serverSettings.WebSocket(url, protocols)`. The WebSocket constructor is the one
 * public seam, so this one drops that argument. The client then frames by what the server selected
 * (`ws.protocol`, here ''), exactly as it does against a server that knows no subprotocols.
 */
class LegacyWebSocket extends RecordingWebSocket {
  constructor(url: string) {
    super(url, []);
  }
}

/** The last websocket opened to a kernel. */
function socketOf(kernelId: string): IOpenedSocket {
  const socket = opened.filter(o => o.url.includes(kernelId)).at(-1);
  if (!socket) {
    throw new Error(`no websocket was opened to kernel ${kernelId}`);
  }
  return socket;
}

/**
 * Dispose a manager as JupyterLab does on unload, and stop its poll first: lumino's `Poll.dispose()`
 * (2.1) leaves the next tick's timer armed (10 s for kernels and sessions, 61 s for kernelspecs),
 * which would keep Jest from exiting; `stop()` clears it. The poll is private, hence the cast.
 */
function dispose(
  manager: KernelManager | SessionManager | KernelSpecManager
): void {
  const polls = manager as unknown as {
    _pollModels?: { stop(): Promise<void> };
    _pollSpecs?: { stop(): Promise<void> };
  };
  void (polls._pollModels ?? polls._pollSpecs)?.stop();
  manager.dispose();
}

/** The ids of the kernels a manager lists, fetched afresh (it otherwise polls). */
async function runningIds(manager: KernelManager): Promise<string[]> {
  await manager.refreshRunning();
  return [...manager.running()].map(model => model.id);
}

/** Resolve with the first value `signal` emits that satisfies `predicate`. */
function nextEmission<S, T>(
  signal: ISignal<S, T>,
  predicate: (value: T) => boolean,
  what: string,
  timeoutMs = 30000
): Promise<T> {
  return new Promise((resolve, reject) => {
    const slot = (_sender: S, value: T) => {
      if (predicate(value)) {
        clearTimeout(timer);
        signal.disconnect(slot);
        resolve(value);
      }
    };
    const timer = setTimeout(() => {
      signal.disconnect(slot);
      reject(new Error(`timed out waiting for ${what}`));
    }, timeoutMs);
    signal.connect(slot);
  });
}

/** Resolve once the kernel connection's websocket is open. */
async function connected(kernel: Kernel.IKernelConnection): Promise<void> {
  if (kernel.connectionStatus !== 'connected') {
    await nextEmission(
      kernel.connectionStatusChanged,
      status => status === 'connected',
      'the kernel connection'
    );
  }
}

/** What one `requestExecute` produced, as collected by the future's handlers. */
interface IRun {
  reply: KernelMessage.IExecuteReplyMsg;
  iopub: KernelMessage.IIOPubMessage[];
  stdout: string;
  stderr: string;
}

/** Run code the way a notebook cell does and collect its output through `onIOPub`. */
async function execute(
  kernel: Kernel.IKernelConnection,
  code: string,
  options: {
    onInput?: (prompt: string) => string;
    /** Called with every iopub message as it arrives. */
    onIOPub?: (message: KernelMessage.IIOPubMessage) => void;
  } = {}
): Promise<IRun> {
  const future = kernel.requestExecute({
    code,
    allow_stdin: options.onInput !== undefined
  });
  const iopub: KernelMessage.IIOPubMessage[] = [];
  future.onIOPub = message => {
    iopub.push(message);
    options.onIOPub?.(message);
  };
  const onInput = options.onInput;
  if (onInput) {
    future.onStdin = message => {
      if (KernelMessage.isInputRequestMsg(message)) {
        future.sendInputReply(
          { status: 'ok', value: onInput(message.content.prompt) },
          message.header
        );
      }
    };
  }
  const reply = await future.done;
  const text = (name: string) =>
    iopub
      .filter(KernelMessage.isStreamMsg)
      .filter(message => message.content.name === name)
      .map(message => message.content.text)
      .join('');
  return { reply, iopub, stdout: text('stdout'), stderr: text('stderr') };
}

describe('@jupyterlab/services against Ferry', () => {
  let gw: ITestGateway;
  let rootDir: string;

  /** Server settings as JupyterLab makes them, with the token on websocket URLs. */
  const settingsFor = (
    webSocket: typeof RecordingWebSocket
  ): ServerConnection.ISettings =>
    ServerConnection.makeSettings({
      baseUrl: gw.url,
      wsUrl: gw.url.replace(/^http/, 'ws'),
      token: gw.token,
      appendToken: true,
      // The services type this as the DOM WebSocket; `ws` is what JupyterLab uses in Node.
      WebSocket: webSocket as unknown as typeof globalThis.WebSocket
    });

  /** What the client warned about (reconnecting, errant kernelspecs), kept out of the output. */
  const warnings: string[] = [];

  beforeAll(async () => {
    // KernelConnection logs every websocket it opens and every status change at debug level.
    jest.spyOn(console, 'debug').mockImplementation(() => undefined);
    jest.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => {
      warnings.push(args.map(String).join(' '));
    });
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-services-')));
    mkdirSync(path.join(rootDir, 'notebooks'));
    gw = await startGateway({ rootDir });
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
    jest.restoreAllMocks();
  });

  describe('KernelSpecManager', () => {
    let manager: KernelSpecManager;

    beforeAll(() => {
      manager = new KernelSpecManager({
        serverSettings: settingsFor(RecordingWebSocket)
      });
    });

    afterAll(() => dispose(manager));

    it('loads the specs, with python3 as the default', async () => {
      await manager.ready;
      const specs = manager.specs!;
      expect(specs.default).toBe('python3');
      expect(specs.kernelspecs.python3).toMatchObject({
        name: 'python3',
        language: 'python',
        display_name: expect.any(String),
        argv: expect.arrayContaining(['-f', '{connection_file}'])
      });
      // The client drops specs it cannot validate, with a warning.
      expect(
        warnings.filter(w => /kernel spec|Default kernel/.test(w))
      ).toEqual([]);
    });

    it('links logos that the launcher can load', async () => {
      await manager.ready;
      const resources = manager.specs!.kernelspecs.python3!.resources;
      expect(resources['logo-64x64']).toBe(
        '/kernelspecs/python3/logo-64x64.png'
      );
      const settings = manager.serverSettings;
      const response = await ServerConnection.makeRequest(
        settings.baseUrl + resources['logo-64x64'].replace(/^\//, ''),
        {},
        settings
      );
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('image/png');
      const png = Buffer.from(await response.arrayBuffer());
      expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    });
  });

  describe.each([
    { framing: 'legacy', webSocket: LegacyWebSocket, protocol: '' },
    { framing: 'v1', webSocket: RecordingWebSocket, protocol: V1_SUBPROTOCOL }
  ])('KernelManager, $framing framing', ({ framing, webSocket, protocol }) => {
    let manager: KernelManager;
    let kernel: Kernel.IKernelConnection;

    beforeAll(async () => {
      manager = new KernelManager({ serverSettings: settingsFor(webSocket) });
      await manager.ready;
      kernel = await manager.startNew({ name: 'python3' });
    });

    afterAll(() => {
      kernel.dispose();
      dispose(manager);
    });

    it(`starts a kernel and connects with the ${framing} framing`, async () => {
      await connected(kernel);
      expect(kernel.name).toBe('python3');
      const info = await kernel.info;
      expect(info.language_info.name).toBe('python');
      expect(await runningIds(manager)).toContain(kernel.id);
      const socket = socketOf(kernel.id);
      expect(socket.offered.includes(V1_SUBPROTOCOL)).toBe(framing === 'v1');
      expect(socket.socket.protocol).toBe(protocol);
      // Legacy sends JSON in text frames (binary only for buffers); v1 is binary throughout.
      expect(socket.frames.length).toBeGreaterThan(0);
      expect(new Set(socket.frames)).toEqual(
        new Set([framing === 'v1' ? 'binary' : 'text'])
      );
      // Ferry counts the connection.
      const model = await gw.api('GET', `/api/kernels/${kernel.id}`);
      expect(model.body.connections).toBe(1);
    });

    it('runs code, streaming output to onIOPub as it happens', async () => {
      const seen: string[] = [];
      const run = await execute(
        kernel,
        'import sys\nprint("hello", 6 * 7)\nprint("oops", file=sys.stderr)\n21 * 2',
        {
          onIOPub: message =>
            seen.push(
              KernelMessage.isStatusMsg(message)
                ? message.content.execution_state
                : message.header.msg_type
            )
        }
      );
      expect(run.reply.content).toMatchObject({
        status: 'ok',
        execution_count: expect.any(Number)
      });
      expect(run.stdout).toBe('hello 42\n');
      expect(run.stderr).toBe('oops\n');
      const result = run.iopub.find(KernelMessage.isExecuteResultMsg);
      expect(result?.content.data['text/plain']).toBe('42');
      // Busy, the code echoed, its output, then idle: what a notebook cell shows as it runs.
      expect(seen[0]).toBe('busy');
      expect(seen[1]).toBe('execute_input');
      expect(seen).toEqual(
        expect.arrayContaining(['stream', 'execute_result'])
      );
      expect(seen.at(-1)).toBe('idle');
    });

    it('reports an exception with its traceback', async () => {
      const run = await execute(kernel, 'raise ValueError("bad value")');
      expect(run.reply.content).toMatchObject({
        status: 'error',
        ename: 'ValueError',
        evalue: 'bad value'
      });
      expect(run.iopub.some(KernelMessage.isErrorMsg)).toBe(true);
    });

    it('answers input() through onStdin', async () => {
      const prompts: string[] = [];
      const run = await execute(kernel, 'print("hi", input("who? "))', {
        onInput: prompt => {
          prompts.push(prompt);
          return 'ferry';
        }
      });
      expect(prompts).toEqual(['who? ']);
      expect(run.stdout).toBe('hi ferry\n');
    });

    it('answers requestKernelInfo', async () => {
      const reply = await kernel.requestKernelInfo();
      expect(reply?.content).toMatchObject({
        status: 'ok',
        implementation: 'ipython',
        protocol_version: expect.stringMatching(/^5\./),
        language_info: { name: 'python' }
      });
    });

    it('interrupts a running cell', async () => {
      // Interrupt once the cell's own code runs (its first output), as a user pressing Stop does;
      // SIGINT while ipykernel is still setting the cell up can be lost.
      const run = await execute(
        kernel,
        'import time\nprint("sleeping", flush=True)\ntime.sleep(60)',
        {
          onIOPub: message => {
            if (KernelMessage.isStreamMsg(message)) {
              void kernel.interrupt();
            }
          }
        }
      );
      expect(run.stdout).toBe('sleeping\n');
      expect(run.reply.content).toMatchObject({
        status: 'error',
        ename: 'KeyboardInterrupt'
      });
      // The kernel is usable afterwards.
      expect((await execute(kernel, 'print("still here")')).stdout).toBe(
        'still here\n'
      );
    });

    it('restarts on request: restarting, then a fresh kernel on the same id', async () => {
      await execute(kernel, 'remembered = 1');
      const statuses: Kernel.Status[] = [];
      const record = (_: Kernel.IKernelConnection, status: Kernel.Status) => {
        statuses.push(status);
      };
      kernel.statusChanged.connect(record);
      await kernel.restart();
      const run = await execute(kernel, 'print("remembered" in globals())');
      kernel.statusChanged.disconnect(record);
      expect(run.stdout).toBe('False\n');
      expect(statuses[0]).toBe('restarting');
      expect(statuses).toContain('idle');
      // A restart the user asked for is not a crash: JupyterLab shows "The kernel appears to have
      // died. It will restart automatically." on 'autorestarting'.
      expect(statuses).not.toContain('autorestarting');
      expect(kernel.connectionStatus).toBe('connected');
      expect(socketOf(kernel.id).socket.protocol).toBe(protocol);
      expect(await runningIds(manager)).toContain(kernel.id);
    });

    it('sees a kernel that died restart automatically and keeps working', async () => {
      // Let the request the client makes on connecting finish: one still pending when the kernel
      // dies is cancelled by the client and its rejection left unhandled (a client quirk).
      await connected(kernel);
      await kernel.requestKernelInfo();
      const pid = gw.worker.kernelPid(kernel.id)!;
      const restarting = nextEmission(
        kernel.statusChanged,
        status => status === 'autorestarting',
        'autorestarting'
      );
      // The client reconnects at once and asks for kernel info, most likely while the kernel is
      // still starting; it holds the cells it runs meanwhile until that request is done.
      const infoRequests: string[] = [];
      const idleFor = new Set<string>();
      const watch = (
        _: Kernel.IKernelConnection,
        { msg, direction }: Kernel.IAnyMessageArgs
      ) => {
        if (
          direction === 'send' &&
          msg.header.msg_type === 'kernel_info_request'
        ) {
          infoRequests.push(msg.header.msg_id);
        } else if (
          KernelMessage.isStatusMsg(msg) &&
          msg.content.execution_state === 'idle'
        ) {
          idleFor.add(String(msg.parent_header.msg_id));
        }
      };
      kernel.anyMessage.connect(watch);
      process.kill(pid, 'SIGKILL');
      await restarting;
      const run = await execute(kernel, 'print("back")');
      kernel.anyMessage.disconnect(watch);
      expect(run.stdout).toBe('back\n');
      // Each of those requests got its idle status too, so none left the client waiting for its
      // kernel-info timeout (3 s) before it sent the cell.
      expect(infoRequests.length).toBeGreaterThan(0);
      expect(infoRequests.filter(id => !idleFor.has(id))).toEqual([]);
      expect(gw.worker.kernelPid(kernel.id)).not.toBe(pid);
      expect(socketOf(kernel.id).socket.protocol).toBe(protocol);
    });

    it('shuts a kernel down: it leaves running() and the server', async () => {
      const other = await manager.startNew({ name: 'python3' });
      await connected(other);
      expect(await runningIds(manager)).toContain(other.id);
      const disconnected = nextEmission(
        other.connectionStatusChanged,
        status => status === 'disconnected',
        'the websocket to close'
      );
      await manager.shutdown(other.id);
      await disconnected;
      // shutdown() refreshes the list itself: the running-kernels panel updates at once.
      expect([...manager.running()].map(m => m.id)).not.toContain(other.id);
      expect(other.isDisposed).toBe(true);
      expect((await gw.api('GET', `/api/kernels/${other.id}`)).status).toBe(
        404
      );
      // The other kernel is untouched.
      expect(await runningIds(manager)).toContain(kernel.id);
    });
  });

  describe('SessionManager', () => {
    let kernels: KernelManager;
    let sessions: SessionManager;
    let session: Session.ISessionConnection;

    const runningSessions = async (): Promise<Session.IModel[]> => {
      await sessions.refreshRunning();
      return [...sessions.running()];
    };

    beforeAll(async () => {
      const serverSettings = settingsFor(RecordingWebSocket);
      kernels = new KernelManager({ serverSettings });
      sessions = new SessionManager({ kernelManager: kernels, serverSettings });
      await sessions.ready;
    });

    afterAll(() => {
      session?.dispose();
      dispose(sessions);
      dispose(kernels);
    });

    it('starts a session whose kernel runs in the notebook directory', async () => {
      session = await sessions.startNew({
        path: 'notebooks/analysis.ipynb',
        name: 'analysis.ipynb',
        type: 'notebook',
        kernel: { name: 'python3' }
      });
      expect(session).toMatchObject({
        path: 'notebooks/analysis.ipynb',
        name: 'analysis.ipynb',
        type: 'notebook'
      });
      const kernel = session.kernel!;
      expect(kernel.name).toBe('python3');
      await connected(kernel);
      const run = await execute(kernel, 'import os\nprint(os.getcwd())');
      expect(run.stdout).toBe(path.join(rootDir, 'notebooks') + '\n');
    });

    it('lists it in running() and finds it by path', async () => {
      const listed = await runningSessions();
      expect(listed).toEqual([
        expect.objectContaining({
          id: session.id,
          path: 'notebooks/analysis.ipynb',
          kernel: expect.objectContaining({ id: session.kernel!.id })
        })
      ]);
      expect((await sessions.findByPath('notebooks/analysis.ipynb'))?.id).toBe(
        session.id
      );
      // Opening the same notebook again joins the session and its kernel.
      const again = await sessions.startNew({
        path: 'notebooks/analysis.ipynb',
        name: 'analysis.ipynb',
        type: 'notebook',
        kernel: { name: 'python3' }
      });
      expect(again.id).toBe(session.id);
      expect(again.kernel?.id).toBe(session.kernel!.id);
      again.dispose();
    });

    it('renames and moves it (setPath, setName, setType)', async () => {
      const changed: string[] = [];
      session.propertyChanged.connect((_, property) => changed.push(property));
      await session.setPath('notebooks/renamed.ipynb');
      await session.setName('renamed.ipynb');
      await session.setType('console');
      expect(session).toMatchObject({
        path: 'notebooks/renamed.ipynb',
        name: 'renamed.ipynb',
        type: 'console'
      });
      expect(changed).toEqual(['path', 'name', 'type']);
      const [listed] = await runningSessions();
      expect(listed).toMatchObject({
        id: session.id,
        path: 'notebooks/renamed.ipynb',
        name: 'renamed.ipynb',
        type: 'console'
      });
      expect(await sessions.findByPath('notebooks/analysis.ipynb')).toBe(
        undefined
      );
    });

    it('changes kernel: a new kernel, the old one shut down', async () => {
      const previous = session.kernel!;
      await execute(previous, 'remembered = 1');
      const changed = nextEmission(
        session.kernelChanged,
        () => true,
        'kernelChanged'
      );
      const next = (await session.changeKernel({ name: 'python3' }))!;
      const { oldValue, newValue } = await changed;
      expect(oldValue?.id).toBe(previous.id);
      expect(newValue?.id).toBe(next.id);
      expect(next.id).not.toBe(previous.id);
      expect(session.kernel).toBe(next);
      await connected(next);
      const run = await execute(next, 'print("remembered" in globals())');
      expect(run.stdout).toBe('False\n');
      expect((await gw.api('GET', `/api/kernels/${previous.id}`)).status).toBe(
        404
      );
      const [listed] = await runningSessions();
      expect(listed.kernel?.id).toBe(next.id);
    });

    it('shuts it down with its kernel', async () => {
      const kernelId = session.kernel!.id;
      await sessions.shutdown(session.id);
      expect(await runningSessions()).toEqual([]);
      expect(session.isDisposed).toBe(true);
      expect((await gw.api('GET', `/api/kernels/${kernelId}`)).status).toBe(
        404
      );
      expect(await runningIds(kernels)).not.toContain(kernelId);
    });
  });
});
