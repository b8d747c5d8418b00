/**
 * Notebook trust judged per viewer: in a room whose notebook lies in a signed-in person's folder,
 * the doc everyone shares carries no trust (every cell untrusted, whoever marks one), and each
 * connection is told, in a raw message of its own (`{"type": "trust", "cells": [ids]}`), the cells
 * that its viewer trusts: the folder's owner, the cells their own notary trusts (or their own
 * connections marked trusted since) whose outputs are still those; another signed-in person (an
 * admin, or one the notebook is granted to by name), the cells whose outputs they trusted there,
 * kept in their own notary (the one their own notebooks' trust is in); a link's holder and the
 * token's owner, none (a guest never trusts). A save while the owner trusts every cell with outputs
 * is signed with the owner's notary, so the notebook opens trusted for them again.
 * The hosted lab marks those cells trusted in that viewer's view only, and asks the room to keep
 * what its viewer trusts (`sharing-extension` `trust.ts`). With `--auth token` (no person's folder)
 * trust stays in the doc, as before.
 *
 * @packageDocumentation
 */
import * as Y from 'yjs';
import type { IPrincipal } from '../auth';
import type { IContentsModel } from '../contents';
import { canonicalJson, NOTEBOOK } from './documents';

/** What the rooms ask about trust (the gateway answers from its users' folders and notaries). */
export interface IViewerTrust {
  /** Whether trust in the notebook at `path` (the root's name) is each viewer's own. */
  perViewer(path: string): boolean;
  /** Whether `principal` is the owner of the folder that holds `path`, acting as themselves. */
  isOwner(principal: IPrincipal, path: string): boolean;
  /** The notebook at `path` as its folder's owner's notary marks it (cells' `metadata.trusted`). */
  ownerNotebook(path: string): Promise<unknown>;
  /**
   * Save `content` (its code cells marked trusted) at `path` through its folder's owner's contents
   * manager, whose notary signs it.
   */
  saveSigned(path: string, content: unknown): Promise<IContentsModel>;
  /**
   * The own trust store of `principal`, not the owner of the folder that holds `path`: a signed-in
   * person acting as themselves (an admin) or through a grant to them by name. Undefined for a
   * link's holder (a guest never trusts), the token's owner and a read-only API token.
   */
  storeOf(principal: IPrincipal, path: string): IViewerTrustStore | undefined;
}

/**
 * What one person trusts in rooms' notebooks that are not theirs, kept in their own notary: a
 * cell's outputs, in one notebook (by file id). Their trust never reaches anyone else's view.
 */
export interface IViewerTrustStore {
  /** Keep `cells` (id to outputs as canonical JSON) of notebook `fileId` trusted. */
  sign(fileId: string, cells: Map<string, string>): Promise<void>;
  /** The cells of `cells` (id to outputs) whose outputs they trusted in notebook `fileId`. */
  signed(fileId: string, cells: Map<string, string>): Promise<Set<string>>;
}

/**
 * What the owner of a room's notebook trusts in it (a room whose trust is each viewer's): the cells
 * their notary trusted when the room first asked, and those their own connections marked trusted
 * since, each with the outputs it had then. A cell whose outputs changed since is not trusted.
 */
export class OwnerTrust {
  constructor(
    private readonly _source: IViewerTrust,
    private readonly _path: () => string | undefined
  ) {}

  /** The cells the owner trusts: id to outputs (none when their notebook cannot be read). */
  trusted(): Promise<Map<string, string>> {
    this._loading ??= (async () => {
      const path = this._path();
      const content =
        path === undefined ? undefined : await this._source.ownerNotebook(path);
      const trusted = content ? trustedOutputs(content) : new Map();
      for (const [id, outputs] of this._recorded) {
        trusted.set(id, outputs);
      }
      this._map = trusted;
      return trusted;
    })().catch(() => (this._map = new Map<string, string>()));
    return this._loading;
  }

  /** The owner marked cells of `doc` trusted: their outputs as they are now are theirs. */
  record(doc: Y.Doc): void {
    this.recordOutputs(markedOutputs(doc));
  }

  /** The owner trusts these cells (id to outputs) with these outputs. */
  recordOutputs(cells: Map<string, string>): void {
    for (const [id, outputs] of cells) {
      this._recorded.set(id, outputs);
      this._map?.set(id, outputs);
    }
  }

  /**
   * Whether the owner trusts every code cell of `doc` with outputs, as they are: a save then signs
   * the file with the owner's notary, so that it opens trusted for them again.
   */
  covers(doc: Y.Doc): boolean {
    const trusted = this._map;
    return (
      trusted !== undefined &&
      cellsOf(doc).every(cell => {
        const outputs = outputsOf(cell);
        return (
          cell.get('cell_type') !== 'code' ||
          outputs === '[]' ||
          trusted.get(cell.get('id') as string) === outputs
        );
      })
    );
  }

  private _loading: Promise<Map<string, string>> | undefined;
  private _map: Map<string, string> | undefined;
  private readonly _recorded = new Map<string, string>();
}

/** A notebook's content with every code cell marked trusted (a copy). */
export function markedTrusted(content: unknown): unknown {
  const nb = content as { cells?: { cell_type?: string; metadata?: object }[] };
  return {
    ...nb,
    cells: (nb.cells ?? []).map(cell =>
      cell.cell_type === 'code'
        ? { ...cell, metadata: { ...cell.metadata, trusted: true } }
        : cell
    )
  };
}

/** The trusted code cells of `content` (a notebook as a viewer reads it): id to outputs. */
export function trustedOutputs(content: unknown): Map<string, string> {
  const doc = new Y.Doc();
  try {
    NOTEBOOK.fill(doc, content);
    return markedOutputs(doc);
  } finally {
    doc.destroy();
  }
}

/** Every code cell of `doc` with an id: id to its outputs as they are now. */
export function codeOutputs(doc: Y.Doc): Map<string, string> {
  const cells = new Map<string, string>();
  for (const cell of cellsOf(doc)) {
    const id = cell.get('id');
    if (typeof id === 'string' && cell.get('cell_type') === 'code') {
      cells.set(id, outputsOf(cell));
    }
  }
  return cells;
}

/**
 * The cells of a viewer's trust request that `doc` holds with the very outputs the viewer saw:
 * id to outputs. A cell whose outputs changed since they saw it is left out.
 */
export function requestedOutputs(
  doc: Y.Doc,
  requested: readonly { id: string; outputs: unknown[] }[]
): Map<string, string> {
  const now = codeOutputs(doc);
  const cells = new Map<string, string>();
  for (const { id, outputs } of requested) {
    const current = now.get(id);
    if (current !== undefined && current === canonicalJson(outputs)) {
      cells.set(id, current);
    }
  }
  return cells;
}

/** The cells of `doc` a viewer trusts: in `trusted`, with the outputs they had there. */
export function trustedCells(
  doc: Y.Doc,
  trusted: Map<string, string>
): string[] {
  return cellsOf(doc)
    .filter(cell => {
      const id = cell.get('id');
      return (
        typeof id === 'string' &&
        trusted.has(id) &&
        trusted.get(id) === outputsOf(cell)
      );
    })
    .map(cell => cell.get('id') as string);
}

/**
 * Mark untrusted every cell of `doc` marked trusted (in the caller's transaction): in a room whose
 * trust is each viewer's, what one viewer trusts never reaches the others' docs.
 *
 * @returns whether a cell was marked.
 */
export function untrustAll(doc: Y.Doc): boolean {
  let marked = false;
  for (const cell of cellsOf(doc)) {
    const metadata = cell.get('metadata');
    if (metadata instanceof Y.Map && metadata.get('trusted') === true) {
      metadata.set('trusted', false);
      marked = true;
    }
  }
  return marked;
}

function cellsOf(doc: Y.Doc): Y.Map<unknown>[] {
  return doc
    .getArray<unknown>('cells')
    .toArray()
    .filter((cell): cell is Y.Map<unknown> => cell instanceof Y.Map);
}

/** The cells of `doc` marked trusted (with an id): id to outputs as they are now. */
function markedOutputs(doc: Y.Doc): Map<string, string> {
  const marked = new Map<string, string>();
  for (const cell of cellsOf(doc)) {
    const metadata = cell.get('metadata');
    const id = cell.get('id');
    if (
      typeof id === 'string' &&
      metadata instanceof Y.Map &&
      metadata.get('trusted') === true
    ) {
      marked.set(id, outputsOf(cell));
    }
  }
  return marked;
}

/** A cell's outputs as canonical JSON: what trust in a cell is of. */
function outputsOf(cell: Y.Map<unknown>): string {
  const outputs = cell.get('outputs');
  return canonicalJson(outputs instanceof Y.Array ? outputs.toJSON() : []);
}
