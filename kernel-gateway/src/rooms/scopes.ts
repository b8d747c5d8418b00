/**
 * What a connection may change in a room's doc, decided per connection from its principal's
 * capabilities on the room's notebook, never per room: the owner (`files:write`) everything; an edit link everything but outputs and trust (below) and others'
 * comments; a comment link only its own comments in the `comments` root; run and view links
 * nothing at all (not even JupyterLab's `state` bookkeeping: a link below edit writes no shared
 * state, so it can neither fill the store nor flood the other clients).
 *
 * Outputs are written by the gateway's execution path (rooms/execution.ts, cell-outputs.ts), from
 * the owner's kernel; a guest's client writes none. Were an edit link let add an output to a cell,
 * it could put HTML and scripts under a cell that the owner's JupyterLab trusts, and they would run
 * in the owner's page with the owner's credentials. It may clear outputs, and a cell it inserts may
 * carry outputs (a moved cell is a new copy in JupyterLab); connection.ts marks such a cell
 * untrusted in the same transaction, unless it is a trusted cell moved as it was.
 *
 * A comment belongs to the connection that wrote it: the doc's `commentAuthors` root (written by
 * the gateway only) binds each yjs client id to the identity of the first connection that wrote
 * with it, and a comment's struct carries its writer's client id. A comment may be taken back by
 * its writer (or the owner) only; a thread (`comments/<cellId>`) may be made for a cell that has
 * none, never replaced or removed. A reply names the comment it answers (`replyTo`); a thread is
 * resolved or reopened by a record naming its first comment (`resolves`), written by that comment's
 * writer or the owner.
 *
 * An update is judged by the places it touches (and, in `comments`, by what it adds or takes away):
 * each new struct's place is found by walking its parents (in the doc, or in the update itself),
 * each deletion's in the doc. An update that touches anything else, or that cannot be placed, is
 * refused whole.
 */
import * as Y from 'yjs';
import { can, visitorName, type IPrincipal, type NotebookRef } from '../auth';

/**
 * A place in a doc, from its root: `['cells', '#', 'outputs', '#', 'text', '#']` is a character of
 * a stream output's text (`#` stands for a position in an array or a text).
 */
export type DocPath = readonly string[];

/** The root where comment threads are kept, keyed by cell id. */
export const COMMENTS_ROOT = 'comments';

/** The root binding yjs client ids to who wrote with them (gateway-written). */
export const AUTHORS_ROOT = 'commentAuthors';

/** One change an update would make, as a rule judges it. */
export interface IChange {
  /** Where. */
  path: DocPath;
  kind: 'insert' | 'delete';
  /** What is inserted, or what is deleted (JSON values, characters, or shared types). */
  values(): unknown[];
  /** The yjs client id of the struct inserted or deleted. */
  client: number;
  /**
   * Where in `path` the part made by this very update starts: 2 for an output pushed into an
   * existing cell's `outputs` (`cells/#` was there), 1 for anything inside a cell the update
   * inserts. A deletion's is `path.length`.
   */
  fresh: number;
  /** The doc the update would change (as it is before it). */
  doc: Y.Doc;
}

/** Whether a connection may make a change. */
export type ChangeRule = (change: IChange) => boolean;

/**
 * Who a connection is, for the comments it writes: a share link's visitor's id (or `link-<id>`),
 * else its principal's id (`owner`).
 */
export function identityOf(principal: IPrincipal): string {
  return principal.share ? visitorName(principal.share).id : principal.id;
}

/** The identity a yjs client id is bound to in `doc`, if any. */
export function authorOf(doc: Y.Doc, client: number): string | undefined {
  const value = doc.getMap<string>(AUTHORS_ROOT).get(String(client));
  return typeof value === 'string' ? value : undefined;
}

/**
 * The rule of a connection of `principal` to the room of `notebook`; undefined (`files:write`, the
 * owner): every update is applied as it is. With `notebook:edit`, updates are still placed first,
 * so one that cannot be (a gap, a parent nobody has) is refused instead of waiting in the doc's
 * memory; with `notebook:comment`, comments only; otherwise nothing.
 */
export function changeRule(
  principal: IPrincipal,
  notebook: NotebookRef
): ChangeRule | undefined {
  if (can(principal, 'files:write')) {
    return undefined;
  }
  const id = identityOf(principal);
  const name = principal.share
    ? visitorName(principal.share).name
    : principal.id;
  if (can(principal, 'notebook:edit', notebook)) {
    return change =>
      change.path[0] === COMMENTS_ROOT
        ? comments(change, id, name)
        : change.path[0] !== AUTHORS_ROOT && Private.noOutputWritten(change);
  }
  if (can(principal, 'notebook:comment', notebook)) {
    return change => comments(change, id, name);
  }
  return () => false;
}

/** The most characters of a comment's text (the page's box takes 2000). */
export const MAX_COMMENT_CHARS = 4000;

/**
 * The `comments` root as a guest may change it: a thread (`comments/<cellId>`, an array) made for a
 * cell that has none; comments (`{id, author, text, time}`, small strings) added to a thread under
 * the guest's own name from a client id that is theirs, or taken back when theirs. Replacing or
 * removing a whole thread is not theirs to do.
 */
function comments(change: IChange, identity: string, name: string): boolean {
  const { path, kind, values, client, doc } = change;
  if (path[0] !== COMMENTS_ROOT) {
    return false;
  }
  // A client id is the writer's when bound to them, or when the doc has nothing of it yet (it is
  // bound to them once applied): continuing someone else's unbound client would take it over.
  const owner = authorOf(doc, client);
  const theirs =
    owner === undefined
      ? Y.getState(doc.store, client) === 0
      : owner === identity;
  if (path.length === 2) {
    // A map item at a key that holds a thread would replace it (whatever its origin says).
    return (
      kind === 'insert' &&
      !doc.getMap(COMMENTS_ROOT).has(path[1]) &&
      theirs &&
      // A new array: its comments come as structs of their own, judged one by one.
      values().every(value => value instanceof Y.Array)
    );
  }
  if (path.length !== 3 || path[2] !== '#') {
    return false;
  }
  if (kind === 'delete') {
    return owner === identity;
  }
  return (
    theirs &&
    values().every(
      value =>
        Private.ownComment(value, name) &&
        Private.mayResolve(value, doc, path[1], identity)
    )
  );
}

/**
 * Whether every change `update` would make to `doc` is allowed by `rule`. Structs the doc already
 * has are no change; a struct or deletion that cannot be placed (a gap in its client's clock, a
 * parent nobody has) is not allowed.
 *
 * @param newClients - filled with the client ids the update writes with that the doc has no
 * struct of yet (a client a connection may be bound to).
 * @throws when `update` is not a yjs update.
 */
export function updateAllowed(
  doc: Y.Doc,
  update: Uint8Array,
  rule: ChangeRule,
  newClients?: Set<number>
): boolean {
  const { structs, ds } = Y.decodeUpdate(update);
  const places = new Private.Places(doc, structs);
  // How far each client's clock reaches in the doc and the structs before this one.
  const reach = new Map<number, number>();
  for (const struct of structs) {
    if (struct instanceof Y.Skip) {
      continue;
    }
    const { client, clock } = struct.id;
    const known = reach.get(client) ?? Y.getState(doc.store, client);
    if (clock + struct.length <= known) {
      continue;
    }
    if (clock > known || !(struct instanceof Y.Item)) {
      return false;
    }
    if (!reach.has(client) && known === 0) {
      newClients?.add(client);
    }
    reach.set(client, clock + struct.length);
    const place = places.place(struct);
    if (
      !place ||
      !rule({
        ...place,
        kind: 'insert',
        values: () => struct.content.getContent(),
        client,
        doc
      })
    ) {
      return false;
    }
  }
  for (const [client, ranges] of ds.clients) {
    for (const { clock, len } of ranges) {
      if (!places.deletionAllowed(client, clock, len, rule)) {
        return false;
      }
    }
  }
  return true;
}

namespace Private {
  type Struct = Y.Item | Y.GC | Y.Skip;

  /** Finds where structs of the doc or of an update sit. */
  export class Places {
    constructor(doc: Y.Doc, structs: Struct[]) {
      this._doc = doc;
      for (const struct of structs) {
        let list = this._update.get(struct.id.client);
        if (!list) {
          list = [];
          this._update.set(struct.id.client, list);
        }
        list.push(struct);
      }
    }

    /** The place of a struct of the update; undefined when it cannot be placed. */
    place(item: Y.Item, depth = 0): IPlace | undefined {
      if (depth > MAX_DEPTH) {
        return undefined;
      }
      const known = this._places.get(item);
      if (known) {
        return known;
      }
      let place: IPlace | undefined;
      const parent = item.parent as unknown;
      if (typeof parent === 'string') {
        place = { path: [parent, item.parentSub ?? '#'], fresh: 1 };
      } else if (parent instanceof Y.ID) {
        const outer = this._placeOf(parent, depth);
        place = outer && {
          path: [...outer.path, item.parentSub ?? '#'],
          fresh: Math.min(outer.fresh, outer.path.length)
        };
      } else if (parent === null) {
        // Its parent and key are its neighbour's.
        const neighbour = item.origin ?? item.rightOrigin;
        const beside = neighbour ? this._placeOf(neighbour, depth) : undefined;
        place = beside && {
          path: beside.path,
          fresh: Math.min(beside.fresh, beside.path.length - 1)
        };
      }
      if (place) {
        this._places.set(item, place);
      }
      return place;
    }

    /** Whether deleting `len` structs of `client` from `clock` on touches only allowed places. */
    deletionAllowed(
      client: number,
      clock: number,
      len: number,
      rule: ChangeRule
    ): boolean {
      const end = clock + len;
      const known = Y.getState(this._doc.store, client);
      if (clock < known) {
        const structs = this._doc.store.clients.get(client)!;
        for (
          let index = Y.findIndexSS(structs, clock);
          index < structs.length && structs[index].id.clock < end;
          index++
        ) {
          const struct = structs[index];
          if (!(struct instanceof Y.Item) || struct.deleted) {
            continue;
          }
          const path = docPath(struct);
          if (
            !rule({
              path,
              fresh: path.length,
              kind: 'delete',
              values: () => struct.content.getContent(),
              client,
              doc: this._doc
            })
          ) {
            return false;
          }
        }
      }
      if (end <= known) {
        return true;
      }
      // The rest deletes what the update itself inserts (already judged), or nothing anyone has.
      const own = this._update.get(client) ?? [];
      for (let at = Math.max(clock, known); at < end;) {
        const struct = own.find(
          s => s.id.clock <= at && at < s.id.clock + s.length
        );
        if (!struct || struct instanceof Y.Skip) {
          return false;
        }
        at = struct.id.clock + struct.length;
      }
      return true;
    }

    /**
     * The place of the struct holding `id` (in the doc, else in the update); a struct of the doc
     * is no part of the update (`fresh` past its path).
     */
    private _placeOf(id: Y.ID, depth: number): IPlace | undefined {
      if (id.clock < Y.getState(this._doc.store, id.client)) {
        const struct = Y.getItem(this._doc.store, id) as Y.Item | Y.GC;
        if (!(struct instanceof Y.Item)) {
          return undefined;
        }
        const path = docPath(struct);
        return { path, fresh: path.length };
      }
      const struct = (this._update.get(id.client) ?? []).find(
        s => s.id.clock <= id.clock && id.clock < s.id.clock + s.length
      );
      return struct instanceof Y.Item
        ? this.place(struct, depth + 1)
        : undefined;
    }

    private _doc: Y.Doc;
    private _update = new Map<number, Struct[]>();
    private _places = new Map<Y.Item, IPlace>();
  }

  /** Where a struct of an update sits, and from where on its path the update makes it. */
  export interface IPlace {
    path: DocPath;
    fresh: number;
  }

  /**
   * An edit link's change writes no output into a cell that was there before the update: outputs
   * come from the owner's kernel through the gateway. Taking outputs away (clearing) is allowed,
   * and so are outputs inside a cell the update inserts (connection.ts distrusts that cell).
   */
  export function noOutputWritten({ path, kind, fresh }: IChange): boolean {
    return !(
      kind === 'insert' &&
      path[0] === 'cells' &&
      path[2] === 'outputs' &&
      path.length > 3 &&
      fresh >= 2
    );
  }

  /**
   * A comment as the page writes it, under `name`, of small strings only: `{id, author, text,
   * time}`, with `replyTo` (the id of the comment it answers), or a thread's resolution `{...,
   * resolves: <id of the thread's first comment>, resolved: boolean}`.
   */
  export function ownComment(value: unknown, name: string): boolean {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return false;
    }
    const { id, author, text, time, replyTo, resolves, resolved, ...rest } =
      value as Record<string, unknown>;
    const shortId = (v: unknown) => typeof v === 'string' && v.length <= 128;
    return (
      Object.keys(rest).length === 0 &&
      (replyTo === undefined || shortId(replyTo)) &&
      (resolves === undefined
        ? resolved === undefined
        : shortId(resolves) &&
          replyTo === undefined &&
          typeof resolved === 'boolean') &&
      author === name &&
      typeof id === 'string' &&
      id.length <= 128 &&
      typeof text === 'string' &&
      text.length <= MAX_COMMENT_CHARS &&
      (typeof time === 'string' || typeof time === 'number') &&
      String(time).length <= 64
    );
  }

  /**
   * Whether a guest `identity` may write `value` into the thread of `cellId`: a resolution only of a
   * thread whose first comment it wrote (the owner resolves any; the owner has no rule).
   */
  export function mayResolve(
    value: unknown,
    doc: Y.Doc,
    cellId: string,
    identity: string
  ): boolean {
    const resolves = (value as { resolves?: unknown }).resolves;
    if (resolves === undefined) {
      return true;
    }
    const thread = doc.getMap(COMMENTS_ROOT).get(cellId);
    if (!(thread instanceof Y.Array)) {
      return false;
    }
    for (let item = thread._start; item; item = item.right) {
      if (item.deleted) {
        continue;
      }
      const found = item.content
        .getContent()
        .some(
          (entry: unknown) =>
            typeof entry === 'object' &&
            entry !== null &&
            (entry as { id?: unknown }).id === resolves
        );
      if (found) {
        return authorOf(doc, item.id.client) === identity;
      }
    }
    return false;
  }

  /** Nesting deeper than any notebook has: an update claiming more is refused. */
  const MAX_DEPTH = 64;

  /** The place of an item integrated in the doc. */
  export function docPath(item: Y.Item): DocPath {
    const path: string[] = [];
    let current = item;
    for (;;) {
      path.unshift(current.parentSub ?? '#');
      const type = current.parent as Y.AbstractType<unknown>;
      if (!type._item) {
        path.unshift(Y.findRootTypeKey(type));
        return path;
      }
      current = type._item;
    }
  }
}
