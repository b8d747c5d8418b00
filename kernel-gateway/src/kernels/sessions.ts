import { randomUUID } from 'node:crypto';
import type { IKernelModel } from './kernel-model';
import type { KernelRegistry } from './registry';
import type { IAcceleratorRequest } from '../scheduler';
import type { RestSchemas } from '../protocol';
import { existingWorkingDir, kernelWorkingDir } from './working-dir';

/** The session model of the Jupyter Server REST API (schema `Session`). */
export type ISessionModel = RestSchemas['Session'];

/** Raised for a session id that is not known. */
export class NoSuchSessionError extends Error {
  constructor(readonly sessionId: string) {
    super(`Session does not exist: ${sessionId}`);
  }
}

/**
 * What a client asks of a session, as the route reads it: schema `SessionRequest`, its kernel's
 * nulls left out and its accelerator normalised once (`requestedAccelerator`).
 */
export interface ISessionRequest extends Pick<
  RestSchemas['SessionRequest'],
  'path' | 'name' | 'type'
> {
  /** The user it is for (users/ownership.ts), with its kernel; left out: the owner's. */
  owner?: string;
  kernel?: {
    id?: string;
    name?: string;
    env?: Record<string, string>;
    /** The devices for a new kernel (default: none). */
    accelerator?: IAcceleratorRequest;
    /** Or an offer of the profiles file, which an engine starts a worker for. */
    offer?: string;
    /** Whether the accelerator or offer came from `KERNEL_ACCELERATOR` in `env`. */
    fromEnvironment?: boolean;
    /** The environment for a new kernel (`KERNEL_ENVIRONMENT` in `env` otherwise). */
    environment?: string;
  };
}

/**
 * Sessions: a notebook (or console) path bound to a kernel. Kept in memory, like jupyter_server's
 * default session manager.
 */
export class SessionStore {
  constructor(
    private _registry: KernelRegistry,
    private _rootDir: string
  ) {}

  /**
   * Whether a kernel started for the notebook at `path` is confined to the notebook's folder (a
   * share link of it that runs code asks so); set by the gateway, which has the share links.
   */
  confineFor: ((path: string) => boolean) | undefined;

  /** The sessions; `mayReach(owner)`: only those of the users it says. */
  list(
    mayReach: (owner: string | undefined) => boolean = () => true
  ): ISessionModel[] {
    return [...this._sessions.values()]
      .filter(session => mayReach(session.owner))
      .map(session => this.get(session.id));
  }

  /** Whose a session is (users/ownership.ts); undefined for the owner's, or none with that id. */
  ownerOf(id: string): string | undefined {
    return this._sessions.get(id)?.owner;
  }

  /** Whether a session of that id exists. */
  has(id: string): boolean {
    return this._sessions.has(id);
  }

  /**
   * The kernel a notebook at `path` uses: that of its first session whose kernel exists (what a
   * share link of the notebook reaches).
   */
  kernelOf(path: string): string | undefined {
    for (const session of this._sessions.values()) {
      if (session.path === path && this._registry.get(session.kernelId)) {
        return session.kernelId;
      }
    }
    return undefined;
  }

  /**
   * Call `listener` after a session is made, moved to another kernel or path, or removed.
   *
   * @returns a function that stops the calls.
   */
  onChanged(listener: () => void): () => void {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  /** The path of the first session bound to a kernel, if any (no kernel models built). */
  pathOf(kernelId: string): string | undefined {
    for (const session of this._sessions.values()) {
      if (session.kernelId === kernelId) {
        return session.path;
      }
    }
    return undefined;
  }

  get(id: string): ISessionModel {
    const session = this._sessions.get(id);
    if (!session) {
      throw new NoSuchSessionError(id);
    }
    const { owner: _owner, ...model } = session;
    return {
      ...model,
      kernel: this._modelOf(session.kernelId)
    };
  }

  /**
   * Whether a request would start a kernel (what the kernel quota counts): a new session for a path
   * without one that names no existing kernel ({@link create}), or a session moved to a new kernel
   * by name ({@link update}, `moving`). Takes the request as sent, before it is validated.
   */
  startsKernel(
    request: SessionStore.IStartQuestion,
    moving = false,
    owner?: string
  ): boolean {
    const kernel = request.kernel ?? undefined;
    if (moving) {
      return Private.namesKernel(kernel) && !kernel?.id;
    }
    const path = typeof request.path === 'string' ? request.path : '';
    return !kernel?.id && this._sessionFor(path, owner) === undefined;
  }

  /** Create a session, or return the existing one for the same path (as jupyter_server does). */
  async create(request: ISessionRequest): Promise<ISessionModel> {
    const path = request.path ?? '';
    const existing = this._sessionFor(path, request.owner);
    if (existing !== undefined) {
      return this.get(existing);
    }
    const kernelId = await this._kernelFor(request, path);
    const id = randomUUID();
    this._sessions.set(id, {
      id,
      path,
      name: request.name ?? '',
      type: request.type ?? 'notebook',
      kernelId,
      ...(request.owner !== undefined ? { owner: request.owner } : {})
    });
    this._changed();
    return this.get(id);
  }

  /** Rename, retype, or move a session to another kernel (a new one by name, or an existing id). */
  async update(id: string, request: ISessionRequest): Promise<ISessionModel> {
    const session = this._sessions.get(id);
    if (!session) {
      throw new NoSuchSessionError(id);
    }
    const path = request.path ?? session.path;
    if (Private.namesKernel(request.kernel)) {
      const previous = session.kernelId;
      const next = await this._kernelFor(
        { ...request, owner: session.owner },
        path
      );
      session.kernelId = next;
      session.path = path;
      this._changed();
      if (
        previous !== next &&
        this._registry.get(previous) &&
        !this._isShared(previous)
      ) {
        await this._registry.shutdown(previous);
      }
    }
    session.path = path;
    session.name = request.name ?? session.name;
    session.type = request.type ?? session.type;
    this._changed();
    return this.get(id);
  }

  /**
   * Move the sessions of the notebook at `path` whose kernel is not confined to a new kernel of the
   * same kernelspec and environment, started confined (see {@link confineFor}); the old one is shut
   * down, as a restart would end it.
   */
  async confine(path: string): Promise<void> {
    for (const [id, session] of [...this._sessions]) {
      const kernel = this._registry.get(session.kernelId);
      if (session.path !== path || !kernel || kernel.launch.confinement) {
        continue;
      }
      await this.update(id, {
        kernel: {
          name: kernel.name,
          ...(kernel.launch.environment !== undefined
            ? { environment: kernel.launch.environment }
            : {})
        }
      });
    }
  }

  /** Delete a session and shut down its kernel. */
  async delete(id: string): Promise<void> {
    const session = this._sessions.get(id);
    if (!session) {
      throw new NoSuchSessionError(id);
    }
    this._sessions.delete(id);
    this._changed();
    if (
      this._registry.get(session.kernelId) &&
      !this._isShared(session.kernelId)
    ) {
      await this._registry.shutdown(session.kernelId);
    }
  }

  /** Forget sessions whose kernel is gone. */
  dropKernel(kernelId: string): void {
    let dropped = false;
    for (const [id, session] of this._sessions) {
      if (session.kernelId === kernelId) {
        this._sessions.delete(id);
        dropped = true;
      }
    }
    if (dropped) {
      this._changed();
    }
  }

  private async _kernelFor(
    request: ISessionRequest,
    path: string
  ): Promise<string> {
    if (request.kernel?.id) {
      return this._registry.require(request.kernel.id).id;
    }
    const cwd = await existingWorkingDir(
      this._rootDir,
      kernelWorkingDir(this._rootDir, path)
    );
    const kernel = await this._registry.start({
      name: request.kernel?.name,
      env: request.kernel?.env,
      accelerator: request.kernel?.accelerator,
      offer: request.kernel?.offer,
      fromEnvironment: request.kernel?.fromEnvironment,
      environment: request.kernel?.environment,
      cwd,
      ...(request.owner !== undefined ? { owner: request.owner } : {}),
      ...(this.confineFor?.(path)
        ? { confinement: { root: this._rootDir, dir: cwd } }
        : {})
    });
    return kernel.id;
  }

  /** The session of `path` for `owner` whose kernel exists, if any (none for an empty path). */
  private _sessionFor(path: string, owner?: string): string | undefined {
    for (const [id, session] of this._sessions) {
      if (
        path &&
        session.path === path &&
        session.owner === owner &&
        this._registry.get(session.kernelId)
      ) {
        return id;
      }
    }
    return undefined;
  }

  private _modelOf(kernelId: string): IKernelModel | null {
    const kernel = this._registry.get(kernelId);
    return kernel ? this._registry.model(kernel) : null;
  }

  private _isShared(kernelId: string): boolean {
    return [...this._sessions.values()].some(s => s.kernelId === kernelId);
  }

  private _changed(): void {
    for (const listener of [...this._listeners]) {
      listener();
    }
  }

  private _listeners = new Set<() => void>();
  private _sessions = new Map<
    string,
    {
      id: string;
      path: string;
      name: string;
      type: string;
      kernelId: string;
      owner?: string;
    }
  >();
}

export namespace SessionStore {
  /** What {@link SessionStore.startsKernel} looks at in a request, as sent. */
  export interface IStartQuestion {
    path?: unknown;
    kernel?: { id?: unknown; name?: unknown } | null;
  }
}

namespace Private {
  /** Whether a session's update names a kernel to move to: an existing one by id, or a new one. */
  export function namesKernel(
    kernel: SessionStore.IStartQuestion['kernel']
  ): boolean {
    return !!kernel && (kernel.id ?? kernel.name ?? undefined) !== undefined;
  }
}
