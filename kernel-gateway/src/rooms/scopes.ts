/**
 * What a connection may change in a room's doc, decided per connection from its access, never per
 * room: the owner and edit links everything; comment and run links only their own comments in the
 * `comments` root; a view link nothing.
 *
 * A run link runs cells through the server (`POST /api/kernels/{id}/execute`), which writes the
 * outputs and execution state itself: a run link's own client writes none. Were it let write
 * outputs, it could put HTML and scripts under a cell that the owner's JupyterLab trusts (the owner
 * ran it), and they would run in the owner's page with the owner's credentials.
 *
 * An update is judged by the places it touches (and, in `comments`, by what it adds or takes away):
 * each new struct's place is found by walking its parents (in the doc, or in the update itself),
 * each deletion's in the doc. An update that touches anything else, or that cannot be placed, is
 * refused whole.
 */
import * as Y from 'yjs';
import { visitorName, type Access } from '../auth';

/**
 * A place in a doc, from its root: `['cells', '#', 'outputs', '#', 'text', '#']` is a character of
 * a stream output's text (`#` stands for a position in an array or a text).
 */
export type DocPath = readonly string[];

/** One change an update would make, as a rule judges it. */
export interface IChange {
  /** Where. */
  path: DocPath;
  kind: 'insert' | 'delete';
  /** What is inserted, or what is deleted (JSON values, characters, or shared types). */
  values(): unknown[];
}

/** Whether a connection may make a change. */
export type ChangeRule = (change: IChange) => boolean;

/** What every JupyterLab client writes on its own when it syncs (`state.document_id`, `dirty`). */
function clientBookkeeping({ path }: IChange): boolean {
  return (
    path[0] === 'state' &&
    path.length === 2 &&
    (path[1] === 'document_id' || path[1] === 'dirty')
  );
}

/**
 * The rule of a connection with `access`; undefined (the owner): every update is applied as it
 * is. An edit link may change everything, but its updates are still placed first, so one that
 * cannot be (a gap, a parent nobody has) is refused instead of waiting in the doc's memory.
 */
export function changeRule(access: Access): ChangeRule | undefined {
  if (access.kind === 'owner') {
    return undefined;
  }
  switch (access.scope) {
    case 'edit':
      return () => true;
    case 'run':
    case 'comment': {
      const { name } = visitorName(access);
      return change => clientBookkeeping(change) || comments(change, name);
    }
    default:
      return clientBookkeeping;
  }
}

/**
 * The `comments` root as a visitor may change it: a thread (`comments/<cellId>`, an array) made
 * for a cell that has none; comments (`{id, author, text, time}`) added to a thread or taken
 * back, their own only: `author` is the visitor's name (so nobody writes as the owner, or takes
 * another's comment away). Replacing or removing a whole thread is not theirs to do.
 */
function comments({ path, kind, values }: IChange, name: string): boolean {
  if (path[0] !== 'comments') {
    return false;
  }
  if (path.length === 2) {
    return kind === 'insert';
  }
  return (
    path.length === 3 &&
    path[2] === '#' &&
    values().every(
      value =>
        typeof value === 'object' &&
        value !== null &&
        (value as { author?: unknown }).author === name
    )
  );
}

/**
 * Whether every change `update` would make to `doc` is allowed by `rule`. Structs the doc already
 * has are no change; a struct or deletion that cannot be placed (a gap in its client's clock, a
 * parent nobody has) is not allowed.
 *
 * @throws when `update` is not a yjs update.
 */
export function updateAllowed(
  doc: Y.Doc,
  update: Uint8Array,
  rule: ChangeRule
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
    reach.set(client, clock + struct.length);
    const path = places.path(struct);
    if (
      !path ||
      !rule({ path, kind: 'insert', values: () => struct.content.getContent() })
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
    path(item: Y.Item, depth = 0): DocPath | undefined {
      if (depth > MAX_DEPTH) {
        return undefined;
      }
      const known = this._paths.get(item);
      if (known) {
        return known;
      }
      let path: DocPath | undefined;
      const parent = item.parent as unknown;
      if (typeof parent === 'string') {
        path = [parent, item.parentSub ?? '#'];
      } else if (parent instanceof Y.ID) {
        const parentPath = this._placeOf(parent, depth);
        path = parentPath && [...parentPath, item.parentSub ?? '#'];
      } else if (parent === null) {
        // Its parent and key are its neighbour's.
        const neighbour = item.origin ?? item.rightOrigin;
        path = neighbour ? this._placeOf(neighbour, depth) : undefined;
      }
      if (path) {
        this._paths.set(item, path);
      }
      return path;
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
          if (
            !rule({
              path: docPath(struct),
              kind: 'delete',
              values: () => struct.content.getContent()
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

    /** The place of the struct holding `id` (in the doc, else in the update). */
    private _placeOf(id: Y.ID, depth: number): DocPath | undefined {
      if (id.clock < Y.getState(this._doc.store, id.client)) {
        const struct = Y.getItem(this._doc.store, id) as Y.Item | Y.GC;
        return struct instanceof Y.Item ? docPath(struct) : undefined;
      }
      const struct = (this._update.get(id.client) ?? []).find(
        s => s.id.clock <= id.clock && id.clock < s.id.clock + s.length
      );
      return struct instanceof Y.Item
        ? this.path(struct, depth + 1)
        : undefined;
    }

    private _doc: Y.Doc;
    private _update = new Map<number, Struct[]>();
    private _paths = new Map<Y.Item, DocPath>();
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
