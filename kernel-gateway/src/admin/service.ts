/**
 * What admins do to users: see everyone with what they run now (kernels, terminals, jobs, the
 * devices these hold), stop any of it with a reason the user is told (on its sockets, and in a
 * notice their lab shows, kept until they see it), sign a user out everywhere, remove a user (and
 * restore them). Every action is noted in the audit log first-hand: who did it, to whom, when and
 * why.
 *
 * #### Notes
 * Who may call these is the routes' business (`can(principal, 'admin')`); this service trusts its
 * caller. With `--auth token` the one user is the owner, who can be listed and whose things can be
 * stopped, but who is never signed out or removed (the gateway's token is not a session).
 */
import { OWNER } from '../auth/identity';
import type { ApiTokens } from '../auth/api-tokens';
import type { CredentialStore } from '../auth/credentials';
import type { JobService } from '../jobs';
import { FINAL_STATES } from '../jobs/records';
import type { KernelRegistry, SessionStore } from '../kernels';
import type { RestSchemas } from '../protocol/rest';
import type { Scheduler } from '../scheduler';
import type { TerminalRegistry } from '../terminals';
import type { IAccount, UserAccounts } from '../users';
import type { AuditLog, IAuditEntry } from './audit';
import type { IUserNoticeEvent, UserNotices } from './notices';

/** A user as the admin API lists them. */
export type IAdminUser = RestSchemas['AdminUser'];

/** Who acts: the admin's id and name. */
export interface IActor {
  readonly id: string;
  readonly name: string;
}

/** What the admin API answers when it cannot do what was asked: an HTTP status and why. */
export class AdminError extends Error {
  constructor(
    readonly status: 400 | 404 | 409,
    message: string
  ) {
    super(message);
    this.name = 'AdminError';
  }
}

/** What a user is told about an admin's stop (kernel sockets, terminals, the job's reason). */
export function stoppedReason(reason: string): string {
  return `Stopped by an administrator: ${reason}`;
}

/**
 * Users and their things, for admins.
 */
export class AdminService {
  constructor(options: AdminService.IOptions) {
    this._options = options;
    this.audit = options.audit;
    this.notices = options.notices;
  }

  /** The audit log of admin actions. */
  readonly audit: AuditLog;

  /** What users are told of admins' actions on their things. */
  readonly notices: UserNotices;

  /** The name the gateway token's owner goes by. */
  get ownerName(): string {
    return this._options.ownerName;
  }

  /** Every user (the accounts; the owner too when it has anything running, or with no accounts). */
  users(): IAdminUser[] {
    return this._listed().map(([id, account]) => this._user(id, account));
  }

  /** The ids of everyone {@link users} lists, in its order, without what each runs. */
  userIds(): string[] {
    return this._listed().map(([id]) => id);
  }

  /** Stop a kernel (it shuts down; its sockets close with the reason). @throws AdminError */
  async stopKernel(
    actor: IActor,
    kernelId: string,
    reason: string
  ): Promise<IAuditEntry> {
    const kernel = this._options.registry.get(kernelId);
    if (!kernel) {
      throw new AdminError(404, `There is no kernel ${kernelId}`);
    }
    const entry = await this._record(
      actor,
      'stop-kernel',
      kernel.owner,
      kernelId,
      reason
    );
    await this._stopKernel(kernelId, kernel.owner, actor, reason);
    return entry;
  }

  /** Close a terminal (its browsers are told the reason). @throws AdminError */
  async stopTerminal(
    actor: IActor,
    name: string,
    reason: string
  ): Promise<IAuditEntry> {
    const terminal = this._options.terminals.get(name);
    if (!terminal) {
      throw new AdminError(404, `There is no terminal ${name}`);
    }
    const entry = await this._record(
      actor,
      'stop-terminal',
      terminal.owner,
      name,
      reason
    );
    await this._stopTerminal(name, terminal.owner, actor, reason);
    return entry;
  }

  /** Cancel a job that is not over (its state says the reason). @throws AdminError */
  async stopJob(
    actor: IActor,
    jobId: string,
    reason: string
  ): Promise<IAuditEntry> {
    const { jobs } = this._options;
    const job = jobs.list().find(model => model.id === jobId);
    if (!job) {
      throw new AdminError(404, `There is no job ${jobId}`);
    }
    if (FINAL_STATES.has(job.state)) {
      throw new AdminError(409, `Job ${jobId} is over (${job.state})`);
    }
    const entry = await this._record(
      actor,
      'stop-job',
      jobs.ownerOf(jobId),
      jobId,
      reason
    );
    await this._stopJob(jobId, job.name, jobs.ownerOf(jobId), actor, reason);
    return entry;
  }

  /**
   * Sign a user out everywhere: their browser sessions and API tokens end (their sockets close at
   * once). @throws AdminError
   */
  async signOut(
    actor: IActor,
    userId: string,
    reason: string
  ): Promise<IAuditEntry> {
    this._account(userId);
    const entry = await this._record(actor, 'sign-out', userId, null, reason);
    await this._revoke(userId);
    return entry;
  }

  /**
   * Remove a user: everything of theirs that runs is stopped with the reason, they are signed out,
   * and their account refuses sign-ins until restored. Their files stay. @throws AdminError
   */
  async remove(
    actor: IActor,
    userId: string,
    reason: string
  ): Promise<IAuditEntry> {
    const account = this._account(userId);
    if (userId === actor.id) {
      throw new AdminError(409, 'An admin cannot remove themselves');
    }
    if (account.removed) {
      throw new AdminError(409, `${account.name} is removed already`);
    }
    const entry = await this._record(
      actor,
      'remove-user',
      userId,
      null,
      reason
    );
    // First: no new sign-in, then no credential, then nothing running.
    await this._options.accounts!.setRemoved(userId, {
      at: entry.at,
      by: actor.name,
      reason
    });
    await this._revoke(userId);
    await this._stopAll(userId, actor, reason);
    return entry;
  }

  /** Let a removed user sign in again. @throws AdminError */
  async restore(
    actor: IActor,
    userId: string,
    reason: string
  ): Promise<IAuditEntry> {
    const account = this._account(userId);
    if (!account.removed) {
      throw new AdminError(409, `${account.name} is not removed`);
    }
    const entry = await this._record(
      actor,
      'restore-user',
      userId,
      null,
      reason
    );
    await this._options.accounts!.setRemoved(userId, undefined);
    return entry;
  }

  /** The account of `userId`; the owner and strangers are refused. */
  private _account(userId: string): IAccount {
    if (userId === OWNER) {
      throw new AdminError(
        400,
        "The gateway token's owner has no sessions to end and cannot be removed"
      );
    }
    const account = this._options.accounts?.get(userId);
    if (!account) {
      throw new AdminError(404, `There is no user ${userId}`);
    }
    return account;
  }

  private async _revoke(userId: string): Promise<void> {
    await this._options.browserSessions?.revokeUser(userId);
    await this._options.apiTokens.credentials.revokeUser(userId);
  }

  /** Stop every kernel, terminal and job of `userId` that is not over. */
  private async _stopAll(
    userId: string,
    actor: IActor,
    reason: string
  ): Promise<void> {
    const { registry, terminals, jobs } = this._options;
    const mine = (owner: string | undefined) => (owner ?? OWNER) === userId;
    await Promise.all([
      ...jobs
        .list(user => user === userId)
        .filter(job => !FINAL_STATES.has(job.state))
        .map(job =>
          this._stopJob(job.id, job.name, userId, actor, reason).catch(
            () => undefined
          )
        ),
      ...terminals
        .list()
        .filter(terminal => mine(terminal.owner))
        .map(terminal =>
          this._stopTerminal(terminal.name, userId, actor, reason).catch(
            () => undefined
          )
        ),
      ...registry
        .list()
        .filter(kernel => mine(kernel.owner))
        .map(kernel =>
          this._stopKernel(kernel.id, userId, actor, reason).catch(
            () => undefined
          )
        )
    ]);
  }

  /** Shut a kernel down; its sockets and its user's notice say why. */
  private async _stopKernel(
    kernelId: string,
    owner: string | undefined,
    actor: IActor,
    reason: string
  ): Promise<void> {
    const notebook = this._options.sessions.pathOf(kernelId) ?? null;
    // Told first, as the audit log is written first: a lab that sees the kernel gone finds why.
    await this._notify(owner, actor, reason, {
      kind: 'kernel',
      resource: kernelId,
      name: notebook
    });
    await this._options.registry.shutdown(
      kernelId,
      Private.socketReason(stoppedReason(reason))
    );
  }

  /** Close a terminal; its browsers and its user's notice say why. */
  private async _stopTerminal(
    name: string,
    owner: string | undefined,
    actor: IActor,
    reason: string
  ): Promise<void> {
    await this._notify(owner, actor, reason, {
      kind: 'terminal',
      resource: name,
      name: null
    });
    await this._options.terminals.close(name, stoppedReason(reason));
  }

  /** Cancel a job; its state and its user's notice say why. */
  private async _stopJob(
    jobId: string,
    jobName: string | null | undefined,
    owner: string | undefined,
    actor: IActor,
    reason: string
  ): Promise<void> {
    await this._notify(owner, actor, reason, {
      kind: 'job',
      resource: jobId,
      name: jobName ?? null
    });
    await this._options.jobs.cancel(jobId, stoppedReason(reason));
  }

  /** Keep a notice for the owner of what was stopped. */
  private async _notify(
    owner: string | undefined,
    actor: IActor,
    reason: string,
    what: Pick<IUserNoticeEvent, 'kind' | 'resource' | 'name'>
  ): Promise<void> {
    await this.notices.add(owner ?? OWNER, {
      ...what,
      by: actor.name,
      reason,
      message: stoppedReason(reason)
    });
  }

  private _record(
    actor: IActor,
    action: IAuditEntry['action'],
    userId: string | undefined,
    resource: string | null,
    reason: string
  ): Promise<IAuditEntry> {
    const id = userId ?? OWNER;
    return this.audit.record({
      actor: { id: actor.id, name: actor.name },
      action,
      user: { id, name: this._nameOf(id) },
      resource,
      reason
    });
  }

  private _nameOf(userId: string): string {
    return userId === OWNER
      ? this._options.ownerName
      : (this._options.accounts?.get(userId)?.name ?? userId);
  }

  /** Whom {@link users} lists: the accounts, after the owner when it runs anything or with none. */
  private _listed(): [string, IAccount | undefined][] {
    const { accounts } = this._options;
    const listed = (accounts?.list() ?? []).map(
      account => [account.id, account] as [string, IAccount | undefined]
    );
    const owner = accounts ? this._user(OWNER, undefined) : undefined;
    if (
      !owner ||
      owner.kernels.length + owner.terminals.length + owner.jobs.length > 0
    ) {
      listed.unshift([OWNER, undefined]);
    }
    return listed;
  }

  /** One user's row. */
  private _user(id: string, account: IAccount | undefined): IAdminUser {
    const { registry, terminals, jobs, scheduler, sessions } = this._options;
    const mine = (owner: string | undefined) => (owner ?? OWNER) === id;
    const devices = new Set<string>();
    const kernels = registry
      .list()
      .filter(kernel => mine(kernel.owner))
      .map(kernel => {
        const placement = scheduler.placementOf(kernel.id);
        const held = (placement?.deviceIds ?? []).map(
          device => `${placement!.workerId}/${device}`
        );
        held.forEach(device => devices.add(device));
        return {
          id: kernel.id,
          name: kernel.name,
          execution_state: kernel.executionState,
          path: sessions.pathOf(kernel.id) ?? null,
          devices: held
        };
      });
    const shells = terminals
      .list()
      .filter(terminal => mine(terminal.owner))
      .map(terminal => {
        const placement = terminal.placement;
        const held = (placement?.deviceIds ?? []).map(
          device => `${placement!.worker.id}/${device}`
        );
        held.forEach(device => devices.add(device));
        return { name: terminal.name, devices: held };
      });
    const running = jobs
      .list(user => user === id)
      .filter(job => !FINAL_STATES.has(job.state))
      .map(job => ({ id: job.id, name: job.name, state: job.state }));
    return {
      id,
      name: account?.name ?? this._options.ownerName,
      groups: [...(account?.groups ?? [])],
      roles: account ? [...account.roles] : ['admin'],
      removed: account?.removed ? { ...account.removed } : null,
      createdAt: account?.createdAt ?? null,
      lastSeenAt: account ? this._lastSeen(account) : null,
      kernels,
      terminals: shells,
      jobs: running,
      devices: [...devices].sort()
    };
  }

  /** The later of their last sign-in and their credentials' last use. */
  private _lastSeen(account: IAccount): string {
    let last = Date.parse(account.lastSeenAt);
    const used = [
      ...(this._options.browserSessions?.list(account.id) ?? []),
      ...this._options.apiTokens.list(account.id)
    ];
    for (const credential of used) {
      last = Math.max(last, credential.lastUsedAt);
    }
    return new Date(last).toISOString();
  }

  private readonly _options: AdminService.IOptions;
}

export namespace AdminService {
  export interface IOptions {
    audit: AuditLog;
    /** Where users are told of what was done to their things. */
    notices: UserNotices;
    /** The accounts (`--auth oidc` or `jupyterhub`); none with `--auth token`. */
    accounts?: UserAccounts;
    /** Their browser sessions. */
    browserSessions?: Pick<CredentialStore<unknown>, 'list' | 'revokeUser'>;
    apiTokens: ApiTokens;
    registry: KernelRegistry;
    /** Which notebook each kernel is for. */
    sessions: SessionStore;
    terminals: TerminalRegistry;
    jobs: JobService;
    scheduler: Scheduler;
    /** The name the gateway token's owner goes by. */
    ownerName: string;
  }
}

namespace Private {
  /** A websocket close reason: at most 123 bytes, cut on a character. */
  export function socketReason(text: string): string {
    if (Buffer.byteLength(text) <= 123) {
      return text;
    }
    let cut = text;
    while (Buffer.byteLength(`${cut}…`) > 123) {
      cut = cut.slice(0, -1);
    }
    return `${cut}…`;
  }
}
