/**
 * Each user's API tokens (`/api/me/tokens`): secrets that act as the user who made them, for
 * `ferry run`, nbclient and `jupyter server --gateway-url`, presented where the gateway's token is
 * (`Authorization: token`/`Bearer`, `?token=` on sockets). Kept hashed in the credential store's
 * `api-tokens` table; each has a note, an optional expiry and a scope (`full`, `read-only`).
 */
import {
  CredentialStore,
  type EndReason,
  type ICredential
} from './credentials';
import type { ApiTokenScope, IApiTokenResolver, IPrincipal } from './identity';
import type { StateStore } from '../store';

/** What a token keeps beside its user and lifetimes. */
export interface IApiTokenMeta {
  readonly note: string | null;
  readonly scope: ApiTokenScope;
}

/** One token as stored (never its secret). */
export type IApiToken = ICredential<IApiTokenMeta>;

/** Why a token is not made: the HTTP status and message of the answer. */
export class ApiTokenError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}

/** The users' API tokens. */
export class ApiTokens implements IApiTokenResolver {
  constructor(options: ApiTokens.IOptions) {
    this.credentials = new CredentialStore<IApiTokenMeta>({
      store: options.store,
      table: 'api-tokens',
      prefix: ApiTokens.PREFIX,
      now: options.now
    });
    this._principalOf = options.principalOf;
    this._perUser = options.perUser ?? ApiTokens.PER_USER;
    // A token that expires with sockets open is found by the sweep: they close within a minute.
    this._sweeper = setInterval(
      () => void this.credentials.sweep().catch(() => undefined),
      ApiTokens.SWEEP_MS
    );
    this._sweeper.unref();
  }

  /** The tokens, as credentials (`onEnd` tells who holds sockets on one). */
  readonly credentials: CredentialStore<IApiTokenMeta>;

  /**
   * Make a token for `userId`.
   *
   * @param expiresInS - seconds until it expires; undefined: never.
   * @returns its record and its secret: the only time the secret is seen.
   * @throws {ApiTokenError} for a note too long, an expiry out of range, or a user at the limit.
   */
  async create(
    userId: string,
    request: { note?: string; scope?: ApiTokenScope; expiresInS?: number }
  ): Promise<{ token: IApiToken; secret: string }> {
    const note = request.note?.trim() || null;
    if (note !== null && [...note].length > ApiTokens.NOTE_CHARS) {
      throw new ApiTokenError(
        400,
        `A token's note is at most ${ApiTokens.NOTE_CHARS} characters (this one has ${[...note].length})`
      );
    }
    const expiresInS = request.expiresInS;
    if (
      expiresInS !== undefined &&
      (!Number.isInteger(expiresInS) ||
        expiresInS < ApiTokens.MIN_EXPIRY_S ||
        expiresInS > ApiTokens.MAX_EXPIRY_S)
    ) {
      throw new ApiTokenError(
        400,
        `A token expires in ${ApiTokens.MIN_EXPIRY_S} to ${ApiTokens.MAX_EXPIRY_S} seconds (a minute to a year), or never: not ${String(expiresInS)}`
      );
    }
    const held = this.credentials.list(userId).length;
    if (held >= this._perUser) {
      throw new ApiTokenError(
        409,
        `You already hold ${held} API tokens (at most ${this._perUser}): revoke one you no longer use`
      );
    }
    const { credential, secret } = await this.credentials.issue(
      userId,
      { note, scope: request.scope ?? 'full' },
      expiresInS === undefined ? {} : { expiresInMs: expiresInS * 1000 }
    );
    return { token: credential, secret };
  }

  /** The user's live tokens, newest first. */
  list(userId: string): IApiToken[] {
    return this.credentials.list(userId);
  }

  /** Revoke the token `id` of `userId` (its sockets close); false when they hold none such. */
  revoke(userId: string, id: string): Promise<boolean> {
    return this.credentials.revoke(userId, id);
  }

  resolveToken(secret: string): IPrincipal | undefined {
    const token = this.credentials.resolve(secret);
    const user = token && this._principalOf(token.userId);
    return (
      user && {
        ...user,
        token: { id: token.id, scope: token.meta.scope }
      }
    );
  }

  /** Be told when a token ends (revoked, or found expired): its sockets close. */
  onEnd(listener: (token: IApiToken, reason: EndReason) => void): () => void {
    return this.credentials.onEnd(listener);
  }

  /** Stop sweeping. */
  dispose(): void {
    clearInterval(this._sweeper);
  }

  private readonly _principalOf: (userId: string) => IPrincipal | undefined;
  private readonly _perUser: number;
  private readonly _sweeper: NodeJS.Timeout;
}

export namespace ApiTokens {
  export interface IOptions {
    store: StateStore;
    /** Who a user id is now (undefined: nobody any more, and their tokens do not work). */
    principalOf: (userId: string) => IPrincipal | undefined;
    /** Live tokens one user may hold (default {@link PER_USER}). */
    perUser?: number;
    /** The clock (tests of lifetimes). */
    now?: () => number;
  }

  /** What every secret starts with: secret scanners know `ferry_`. */
  export const PREFIX = 'ferry_';
  /** Live tokens one user may hold by default. */
  export const PER_USER = 50;
  /** The longest note. */
  export const NOTE_CHARS = 200;
  /** The shortest and longest expiry, in seconds. */
  export const MIN_EXPIRY_S = 60;
  export const MAX_EXPIRY_S = 365 * 24 * 3600;
  /**
   * The close code of a socket whose token was revoked or expired: 4000 + HTTP 401, the credential
   * no longer authenticates.
   */
  export const CLOSE_CODE = 4401;
  /** How often expired tokens are looked for (their sockets close then). */
  export const SWEEP_MS = 60_000;

  /** What a token's sockets are told when it ends. */
  export function endReason(reason: EndReason): string {
    return reason === 'revoked'
      ? 'This API token was revoked'
      : 'This API token expired';
  }
}
