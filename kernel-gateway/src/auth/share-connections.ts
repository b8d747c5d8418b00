/**
 * The websockets open through each credential that can end while they are open (a share link, an
 * API token): how many a link may hold at once, closing them all when the link or token is revoked
 * or expires (upgrades still waiting too), and closing a link's kernel sockets when its notebook no
 * longer uses their kernel.
 */
import type { IPrincipal } from './identity';

/**
 * The key a principal's sockets are held under here: its share link's id, `token:<id>` for an API
 * token, `session:<id>` for a browser session; undefined for a credential that does not end while
 * its sockets are open (the gateway's token).
 */
export function socketHolder(principal: IPrincipal): string | undefined {
  return principal.share
    ? principal.share.shareId
    : principal.token
      ? tokenHolder(principal.token.id)
      : principal.session && sessionHolder(principal.session.id);
}

/** The key the sockets of the browser session `id` are held under. */
export function sessionHolder(id: string): string {
  return `session:${id}`;
}

/** The key the sockets of the API token `id` are held under. */
export function tokenHolder(id: string): string {
  return `token:${id}`;
}

/** What is needed of a websocket here (ws's WebSocket has it). */
export interface IClosableSocket {
  close(code?: number, reason?: string): void;
  once(event: 'close', listener: () => void): unknown;
}

/**
 * What share links need of the collaboration rooms (rooms/'s RoomManager): closing a link's room
 * sockets, and who is connected through it.
 */
export interface IShareRooms {
  closeShare(shareId: string, code: number, reason: string): void;
  /** A visitor of `shareId` picked a new name: their open room sockets go by it from now on. */
  renameVisitor(shareId: string, visitorId: string, name: string): void;
  visitors(shareId: string): { name: string; since: string | number | Date }[];
}

/** Someone connected through a link: their display name, and since when (ISO 8601). */
export interface IConnectedVisitor {
  name: string;
  since: string;
}

/**
 * Open sockets by holder ({@link socketHolder}: a share link, an API token), with a cap per link.
 */
export class ShareConnections {
  /** @param perLink - sockets one link may hold open at once (0: no limit). */
  constructor(readonly perLink: number = ShareConnections.PER_LINK) {}

  /** Why one more socket through `shareId` is refused (the message of its 429), or undefined. */
  refusal(shareId: string): string | undefined {
    const count = this.count(shareId);
    if (this.perLink > 0 && count >= this.perLink) {
      return `This share link already has ${count} open connections (at most ${this.perLink}): close some tabs`;
    }
    return undefined;
  }

  /**
   * Count `socket` as open through `shareId` until it closes.
   *
   * @param name - the display name of who opened it (a visitor's, or the link's label for an API
   * client), for the owner's list of who is connected.
   * @param visitorId - the visitor's id, so that a new name they pick is shown (see {@link rename}).
   */
  track(
    shareId: string,
    socket: IClosableSocket,
    name: string,
    visitorId?: string,
    kernelId?: string
  ): void {
    let sockets = this._sockets.get(shareId);
    if (!sockets) {
      sockets = new Map();
      this._sockets.set(shareId, sockets);
    }
    sockets.set(socket, {
      name,
      since: new Date().toISOString(),
      visitorId,
      kernelId
    });
    socket.once('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0 && this._sockets.get(shareId) === sockets) {
        this._sockets.delete(shareId);
      }
    });
  }

  /**
   * An upgrade through `shareId` that waits (for its kernel) before it opens: when the link ends
   * meanwhile, `refuse` is called with why, and the upgrade must not open.
   *
   * @returns a function to call once the upgrade opened or gave up.
   */
  pending(shareId: string, refuse: (reason: string) => void): () => void {
    let waiting = this._pending.get(shareId);
    if (!waiting) {
      waiting = new Set();
      this._pending.set(shareId, waiting);
    }
    const entry = { refuse };
    waiting.add(entry);
    return () => {
      waiting.delete(entry);
      if (waiting.size === 0 && this._pending.get(shareId) === waiting) {
        this._pending.delete(shareId);
      }
    };
  }

  /**
   * Close the kernel sockets of every link whose notebook no longer uses their kernel (its session
   * moved to another kernel, or went), with {@link ShareConnections.MOVED_CODE}.
   *
   * @param kernelOf - the kernel a link's notebook uses now (undefined: none, or the link is gone).
   */
  closeStrayKernels(kernelOf: (shareId: string) => string | undefined): void {
    for (const [shareId, sockets] of [...this._sockets]) {
      const now = kernelOf(shareId);
      for (const [socket, entry] of [...sockets]) {
        if (entry.kernelId === undefined || entry.kernelId === now) {
          continue;
        }
        sockets.delete(socket);
        socket.close(
          ShareConnections.MOVED_CODE,
          now === undefined
            ? 'The shared notebook no longer uses this kernel'
            : `The shared notebook uses another kernel now: ${now}`
        );
      }
      if (sockets.size === 0 && this._sockets.get(shareId) === sockets) {
        this._sockets.delete(shareId);
      }
    }
  }

  /** The visitor `visitorId` of `shareId` goes by `name` now, on the sockets open already too. */
  rename(shareId: string, visitorId: string, name: string): void {
    for (const entry of this._sockets.get(shareId)?.values() ?? []) {
      if (entry.visitorId === visitorId) {
        entry.name = name;
      }
    }
  }

  /** The sockets open through `shareId`. */
  count(shareId: string): number {
    return this._sockets.get(shareId)?.size ?? 0;
  }

  /** Who is connected through `shareId`: each name once, with its earliest connection. */
  visitors(shareId: string): IConnectedVisitor[] {
    const first = new Map<string, string>();
    for (const { name, since } of this._sockets.get(shareId)?.values() ?? []) {
      const known = first.get(name);
      if (known === undefined || since < known) {
        first.set(name, since);
      }
    }
    return [...first].map(([name, since]) => ({ name, since }));
  }

  /**
   * Close every socket open through `shareId`, with `code` and `reason`, and refuse its upgrades
   * that still wait.
   */
  close(
    shareId: string,
    code: number = ShareConnections.CLOSE_CODE,
    reason = 'This share link no longer works'
  ): void {
    const waiting = this._pending.get(shareId);
    this._pending.delete(shareId);
    for (const { refuse } of waiting ?? []) {
      refuse(reason);
    }
    const sockets = this._sockets.get(shareId);
    this._sockets.delete(shareId);
    for (const socket of sockets?.keys() ?? []) {
      socket.close(code, reason);
    }
  }

  private _sockets = new Map<
    string,
    Map<
      IClosableSocket,
      IConnectedVisitor & { visitorId?: string; kernelId?: string }
    >
  >();
  private _pending = new Map<
    string,
    Set<{ refuse: (reason: string) => void }>
  >();
}

export namespace ShareConnections {
  /** Sockets one link may hold open at once by default (kernel channels and rooms together). */
  export const PER_LINK = 64;
  /** The close code of a socket whose link was revoked or expired: 4000 + HTTP 403. */
  export const CLOSE_CODE = 4403;
  /** The close code when the shared notebook was deleted: 4000 + HTTP 404, as rooms close theirs. */
  export const GONE_CODE = 4404;
  /**
   * The close code of a link's kernel socket once its notebook uses another kernel (or none): 4000 +
   * HTTP 410, the kernel is gone from what the link reaches; the link itself still works.
   */
  export const MOVED_CODE = 4410;
}
