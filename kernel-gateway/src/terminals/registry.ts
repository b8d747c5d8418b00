// One file: opening, placing, restoring and ending a terminal all work on its one registry entry.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { LimitError, OWNER } from '../auth';
import {
  KernelStateError,
  type KernelEnvironments,
  type KernelRegistry
} from '../kernels';
import type { WorkerPool } from '../pool';
import type { StateStore } from '../store';
import type { IRunAs, IWorkerConnection, RestSchemas } from '../protocol';
import {
  formatAcceleratorSpec,
  holderKey,
  holderOf,
  type IAcceleratorRequest,
  type IPlacement,
  type Scheduler
} from '../scheduler';
import { TerminalError } from './errors';
import { TerminalPlaces, type ITerminalPlace } from './places';
import { ManagedTerminal } from './terminal';

/** What a terminal is opened with. */
export interface ITerminalRequest {
  /** Its name (default: the lowest free number, as jupyter_server names terminals). */
  name?: string;
  /** Its working directory on the worker's host (ignored beside a kernel: the kernel's). */
  cwd?: string;
  /** Client-supplied variables, already filtered by the gateway's allowlist. */
  env: Record<string, string>;
  /** Devices of its own (queued like a kernel's when none are free); none: a CPU terminal. */
  accelerator?: IAcceleratorRequest;
  /** A running kernel to open it beside. */
  kernel?: string;
  /** An environment's name (else `KERNEL_ENVIRONMENT` in `env`; beside a kernel, the kernel's). */
  environment?: string;
  /** The user it is for (users/ownership.ts); left out: the owner's. */
  owner?: string;
}

/**
 * The gateway's terminals: where each runs (a CPU worker, devices the scheduler hands out, or
 * beside a kernel), the limit on how many, their output from the workers to their websockets, and
 * their end (closed, shell exited, kernel or worker gone, gateway shut down).
 *
 * #### Notes
 * A terminal holding devices asks the scheduler for them as a holder of its own (`holderKey`), so
 * it counts against the devices like a kernel and waits in the same queue. Terminals are not adopted
 * across a gateway restart: they close with it, their processes killed. Where each ran is kept in
 * the store (`terminal-places`): the restarted gateway reopens one there when a page restores its
 * tab (a POST of its name alone), or answers `410` saying why it cannot.
 */
export class TerminalRegistry {
  constructor(options: TerminalRegistry.IOptions) {
    this._options = options;
    this._log = options.logger;
    const { pool, scheduler } = options;
    pool.on('terminalOutput', (id, data) =>
      this._entries.get(id)?.terminal.output(data)
    );
    pool.on('terminalWritable', id =>
      this._entries.get(id)?.terminal.writable()
    );
    pool.on('terminalExit', (id, reason) => this._ended(id, reason));
    this._places = new TerminalPlaces(options.store);
    scheduler.on('assigned', (id, placement) => {
      const holder = holderOf(id);
      const entry =
        holder.kind === 'terminal' ? this._entries.get(holder.name) : undefined;
      if (entry) {
        void this._placed(entry, placement).catch(() => undefined);
      }
    });
  }

  list(): ManagedTerminal[] {
    return [...this._entries.values()].map(e => e.terminal);
  }

  get(name: string): ManagedTerminal | undefined {
    return this._entries.get(name)?.terminal;
  }

  /** The terminal named `name`, or a 404. */
  require(name: string): ManagedTerminal {
    const terminal = this.get(name);
    if (!terminal) {
      throw new TerminalError(404, `Terminal does not exist: ${name}`);
    }
    return terminal;
  }

  /** The REST model: jupyter_server's `name` and `last_activity`, and where it runs. */
  model(terminal: ManagedTerminal): RestSchemas['Terminal'] {
    const placement = terminal.placement;
    // Among the requests for the same devices (others are not ahead of it).
    const position = this._options.scheduler.placeInQueue(
      Private.key(terminal.name)
    )?.position;
    return {
      name: terminal.name,
      last_activity: terminal.lastActivity.toISOString(),
      state: terminal.state === 'closed' ? 'running' : terminal.state,
      accelerator: terminal.accelerator,
      ...(placement
        ? { worker: placement.worker.name, devices: placement.deviceIds }
        : {}),
      ...(terminal.kernelId ? { kernel: terminal.kernelId } : {}),
      ...(position !== undefined ? { position } : {}),
      connections: terminal.connections
    };
  }

  /**
   * Open a terminal. Resolves once its shell runs, or at once when it waits in the queue for its
   * devices (its model says where it stands).
   *
   * @throws LimitError (403) past the limit on terminals; TerminalError: 409 for a name in use or a
   * kernel that does not run, 400 for what cannot be asked, 503 when no worker takes terminals,
   * 500 when the worker cannot open it; the scheduler's errors for devices no worker has;
   * NoSuchEnvironmentError for an environment nothing knows, UnsatisfiableRequestError for one no
   * connected worker has.
   */
  async create(asked: ITerminalRequest): Promise<ManagedTerminal> {
    const request = this._restoring(asked);
    const max = this._options.maxTerminals;
    if (max > 0 && this._entries.size >= max) {
      throw new LimitError(
        403,
        `Too many terminals: ${max} are open, the most this gateway allows (--max-terminals); close one first`
      );
    }
    const name = this._nameFor(request.owner, request.name);
    if (this._entries.has(name)) {
      throw new TerminalError(409, `A terminal named ${name} is open already`);
    }
    const { kernels, scheduler, pool } = this._options;
    const kernel =
      request.kernel === undefined ? undefined : kernels.get(request.kernel);
    if (request.kernel !== undefined) {
      if (request.accelerator) {
        throw new TerminalError(
          400,
          'A terminal beside a kernel has that kernel\u2019s devices: ask for a kernel or an accelerator, not both'
        );
      }
      if (!kernel) {
        throw new TerminalError(
          400,
          `Kernel does not exist: ${request.kernel}`
        );
      }
      if (kernel.running) {
        // Held only while used: the terminal needs the kernel's devices now.
        try {
          await kernels.takeDevicesForTerminal(kernel.id);
        } catch (error) {
          throw error instanceof KernelStateError
            ? new TerminalError(409, error.message)
            : error;
        }
        if (this._entries.has(name)) {
          throw new TerminalError(
            409,
            `A terminal named ${name} is open already`
          );
        }
      }
      if (!kernel.running || !kernel.placement) {
        throw new TerminalError(
          409,
          `Kernel ${kernel.id} is not running (${kernel.phase}): a terminal beside it opens once it runs`
        );
      }
    }
    const { environments } = this._options;
    const environment = environments.requested(request, request.env);
    if (kernel && environment !== undefined) {
      throw new TerminalError(
        400,
        `A terminal beside a kernel runs in that kernel\u2019s environment: ask for a kernel or an environment, not both`
      );
    }
    const accelerator =
      request.accelerator && request.accelerator.kind !== 'cpu'
        ? scheduler.check(request.accelerator, environment)
        : undefined;
    if (environment !== undefined) {
      environments.checkAvailable(
        environment,
        accelerator ?? { kind: 'cpu', count: 0 }
      );
    }
    // Checked and counted in one turn: the entry is listed below before anything is awaited.
    this._options.admit?.(request.owner, accelerator);
    const entry: Private.IEntry = {
      request,
      environment,
      size: { rows: 24, cols: 80 },
      terminal: new ManagedTerminal({
        name,
        owner: request.owner,
        accelerator: kernel
          ? formatAcceleratorSpec(kernel.accelerator)
          : formatAcceleratorSpec(accelerator ?? { kind: 'cpu', count: 0 }),
        kernelId: kernel?.id,
        replayChars: this._options.replayChars,
        slowClientTimeoutMs: this._options.slowClientTimeoutMs,
        write: text =>
          entry.terminal.placement?.worker.writeTerminal(name, text) ?? false,
        onResize: (rows, cols) => {
          entry.size = { rows, cols };
          if (entry.terminal.state === 'running') {
            entry.terminal.placement?.worker.resizeTerminal(name, rows, cols);
          }
        },
        onPause: paused =>
          entry.terminal.placement?.worker.pauseTerminal(name, paused),
        logger: this._log
      })
    };
    this._entries.set(name, entry);
    try {
      if (kernel) {
        const worker = pool.get(kernel.placement!.workerId);
        if (!worker) {
          throw new TerminalError(
            409,
            `The worker of kernel ${kernel.id} is gone`
          );
        }
        await this._open(entry, worker, kernel.placement!.deviceIds);
      } else if (accelerator) {
        const result = scheduler.request(
          Private.key(name),
          accelerator,
          undefined,
          request.owner
        );
        if (result.state === 'queued') {
          entry.terminal.notice(
            `waiting for ${formatAcceleratorSpec(accelerator)}: position ${scheduler.placeInQueue(Private.key(name))?.position ?? result.position} in the queue`
          );
          this._log.info(
            { terminal: name, position: result.position },
            'terminal queued for its devices'
          );
          return entry.terminal;
        }
        await this._placed(entry, result.placement);
      } else {
        const worker = this._cpuWorker(environment);
        if (!worker) {
          throw new TerminalError(
            503,
            'No worker takes terminals now: none is connected that runs CPU kernels'
          );
        }
        await this._open(entry, worker, []);
      }
    } catch (error) {
      this._entries.delete(name);
      this._options.scheduler.release(Private.key(name));
      entry.terminal.closed((error as Error).message);
      throw error instanceof TerminalError || error instanceof LimitError
        ? error
        : new TerminalError(
            500,
            `The terminal could not be opened: ${(error as Error).message}`
          );
    }
    return entry.terminal;
  }

  /** A browser's websocket for a terminal (the upgrade checked who may open it). */
  connect(terminal: ManagedTerminal, ws: WebSocket): void {
    terminal.connect(ws);
  }

  /** Close a terminal: its process group is killed and its browsers told. */
  async close(name: string, reason = 'it was closed'): Promise<void> {
    const entry = this._entries.get(name);
    if (!entry) {
      throw new TerminalError(404, `Terminal does not exist: ${name}`);
    }
    const worker = entry.terminal.placement?.worker;
    // Its worker reports the end too: this reason is the one browsers are told.
    entry.closing ??= reason;
    try {
      await worker?.closeTerminal(name);
    } catch (error) {
      this._log.warn(
        { terminal: name, err: (error as Error).message },
        'terminal close on its worker failed'
      );
    }
    this._ended(name, reason);
  }

  /** Close every terminal (the gateway shuts down), remote ones too. */
  async closeAll(reason: string): Promise<void> {
    // Their places stay in the store: the next run reopens a terminal there when its tab comes back.
    this._shuttingDown = true;
    await Promise.all(
      [...this._entries.keys()].map(name => this.close(name, reason))
    );
  }

  /**
   * A page restoring a tab asks for the terminal by name alone (JupyterLab's restore): a terminal
   * of the last run by that name is reopened where it ran (beside the same kernel, adopted again, or
   * on the same accelerator); when that cannot be, a `410` says why, not a CPU shell in its place.
   */
  private _restoring(request: ITerminalRequest): ITerminalRequest {
    if (
      request.name === undefined ||
      request.kernel !== undefined ||
      request.accelerator !== undefined ||
      request.environment !== undefined
    ) {
      return request;
    }
    const name = this._nameFor(request.owner, request.name);
    const before = this._places.peek(name);
    if (!before || before.owner !== request.owner || this._entries.has(name)) {
      return request;
    }
    this._places.take(name);
    if (before.kernel !== undefined) {
      if (!this._options.kernels.get(before.kernel)?.running) {
        throw new TerminalError(
          410,
          `Terminal ${name} (${before.where}) could not be restored: its kernel is gone since the gateway restarted`
        );
      }
      return { ...request, kernel: before.kernel };
    }
    return {
      ...request,
      ...(before.accelerator ? { accelerator: before.accelerator } : {}),
      ...(before.environment !== undefined
        ? { environment: before.environment }
        : {})
    };
  }

  /** Keep where a running terminal is, for the next run of the gateway. */
  private _remember(entry: Private.IEntry, worker: IWorkerConnection): void {
    const { terminal, request, environment } = entry;
    const place: ITerminalPlace = {
      where: `${TerminalPlaces.words(terminal.accelerator)} on ${worker.name}`,
      ...(request.owner !== undefined ? { owner: request.owner } : {}),
      ...(terminal.kernelId !== undefined ? { kernel: terminal.kernelId } : {}),
      ...(!terminal.kernelId &&
      request.accelerator &&
      request.accelerator.kind !== 'cpu'
        ? { accelerator: request.accelerator }
        : {}),
      ...(environment !== undefined ? { environment } : {})
    };
    this._places.remember(terminal.name, place);
  }

  /** Its devices were handed out (at once, or from the queue): open it there. */
  private async _placed(
    entry: Private.IEntry,
    placement: IPlacement
  ): Promise<void> {
    const worker = this._options.pool.get(placement.workerId);
    const name = entry.terminal.name;
    try {
      if (!worker) {
        throw new Error(`worker ${placement.workerId} is gone`);
      }
      await this._open(entry, worker, placement.deviceIds);
    } catch (error) {
      this._ended(name, `it could not open: ${(error as Error).message}`);
      throw error;
    }
  }

  private async _open(
    entry: Private.IEntry,
    worker: IWorkerConnection,
    deviceIds: string[]
  ): Promise<void> {
    const { terminal, request, size, environment } = entry;
    terminal.starting(worker, deviceIds);
    await worker.openTerminal({
      terminalId: terminal.name,
      deviceIds,
      env: request.env,
      cwd: request.cwd,
      besideKernel: terminal.kernelId,
      environment,
      runAs: this._options.runAs?.(terminal.owner),
      rows: size.rows,
      cols: size.cols
    });
    if (this._entries.get(terminal.name) !== entry) {
      // Closed while it opened.
      await worker.closeTerminal(terminal.name).catch(() => undefined);
      return;
    }
    terminal.running();
    this._remember(entry, worker);
    if (entry.size !== size) {
      worker.resizeTerminal(terminal.name, entry.size.rows, entry.size.cols);
    }
    this._log.info(
      {
        terminal: terminal.name,
        worker: worker.name,
        devices: deviceIds,
        kernel: terminal.kernelId
      },
      'terminal opened'
    );
  }

  /** It ended: forget it, free its devices, tell its browsers why. */
  private _ended(name: string, reason: string): void {
    const entry = this._entries.get(name);
    if (!entry) {
      return;
    }
    this._entries.delete(name);
    this._options.scheduler.release(Private.key(name));
    if (!this._shuttingDown) {
      // Closed for good: nothing to restore.
      this._places.forget(name);
    }
    entry.terminal.closed(entry.closing ?? reason);
    this._log.info(
      { terminal: name, reason: entry.closing ?? reason },
      'terminal closed'
    );
  }

  /**
   * The worker of a terminal that holds no device: the embedded one, else one taking CPU kernels;
   * one that has its environment, when it asks for one.
   */
  private _cpuWorker(environment?: string): IWorkerConnection | undefined {
    const workers = this._options.pool
      .list()
      .filter(
        w =>
          environment === undefined ||
          w.environments.some(e => e.name === environment && e.available)
      );
    return (
      workers.find(w => !w.remote && w.acceptsCpu) ??
      workers.find(w => w.connected && w.acceptsCpu)
    );
  }

  /**
   * The name a terminal gets. The token's owner gets `1`, `2`... or the name asked for, as
   * jupyter_server does. A signed-in user's names carry a tag of their own (`3fa9c1-1`, or the
   * name asked for behind it): names are one namespace for routing, and a shared counter or a 409
   * on a name would tell one user that another has terminals.
   */
  private _nameFor(
    owner: string | undefined,
    asked: string | undefined
  ): string {
    const prefix =
      owner === undefined || owner === OWNER
        ? ''
        : `${createHash('sha256').update(owner).digest('hex').slice(0, 6)}-`;
    if (asked !== undefined) {
      return asked.startsWith(prefix) ? asked : `${prefix}${asked}`;
    }
    let n = 1;
    while (this._entries.has(`${prefix}${n}`)) {
      n++;
    }
    return `${prefix}${n}`;
  }

  /** How many terminals `owner` has open (or opening), and the devices of their own they ask for. */
  heldBy(owner: string): { terminals: number; devices: number } {
    let terminals = 0;
    let devices = 0;
    for (const { request } of this._entries.values()) {
      if (request.owner === owner) {
        terminals++;
        if (!request.kernel && request.accelerator?.kind !== 'cpu') {
          devices += request.accelerator?.count ?? 0;
        }
      }
    }
    return { terminals, devices };
  }

  private _options: TerminalRegistry.IOptions;
  private _log: Logger;
  private _entries = new Map<string, Private.IEntry>();
  private _places: TerminalPlaces;
  private _shuttingDown = false;
}

export namespace TerminalRegistry {
  export interface IOptions {
    pool: WorkerPool;
    scheduler: Scheduler;
    kernels: KernelRegistry;
    /** The environments a terminal may ask for, and which workers have them. */
    environments: KernelEnvironments;
    logger: Logger;
    /** Where terminals run is kept here across a restart (none: a restored tab gets a CPU shell). */
    store?: StateStore;
    /** At most this many open terminals (0: no limit). */
    maxTerminals: number;
    /** Characters of recent output kept per terminal for reconnecting browsers. */
    replayChars: number;
    /** A browser that stays a megabyte behind for longer is closed with 1013. */
    slowClientTimeoutMs: number;
    /**
     * The user a terminal of `owner` runs as (users/run-as.ts; beside a kernel, the kernel's wins);
     * undefined, or left out: the worker's kernel user.
     */
    runAs?: (owner: string | undefined) => IRunAs | undefined;
    /**
     * Asked before a terminal of `owner` (with devices of its own, `accelerator`) is opened: the
     * terminals and devices a user may hold (auth/user-limits.ts); throws to refuse it.
     */
    admit?: (
      owner: string | undefined,
      accelerator: IAcceleratorRequest | undefined
    ) => void;
  }
}

namespace Private {
  export interface IEntry {
    terminal: ManagedTerminal;
    request: ITerminalRequest;
    /** The environment it runs in (beside a kernel: the kernel's, left to the worker). */
    environment: string | undefined;
    /** The size browsers last asked for: it opens at that size. */
    size: { rows: number; cols: number };
    /** Why the gateway closes it, once it does. */
    closing?: string;
  }

  /** The key a terminal's devices are held under in the scheduler. */
  export function key(name: string): string {
    return holderKey({ kind: 'terminal', name });
  }
}
