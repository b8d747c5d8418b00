/**
 * Notebook trust judged per viewer: in a room whose notebook lies in a signed-in person's folder,
 * the doc everyone shares carries no trust (every cell untrusted, whoever marks one), and each
 * connection is told, in a raw message of its own (`{"type": "trust", "cells": [ids]}`), the cells
 * that its viewer trusts: the folder's owner, the cells their own notary trusts whose outputs are
 * still those of the signed file; anyone else (an admin, another person, a link's holder), none.
 * The hosted lab marks those cells trusted in that viewer's view only (`sharing-extension`
 * `trust.ts`). With `--auth token` (no person's folder) trust stays in the doc, as before.
 *
 * @packageDocumentation
 */
import * as Y from 'yjs';
import type { IPrincipal } from '../auth';
import { canonicalJson, NOTEBOOK } from './documents';

/** What the rooms ask about trust (the gateway answers from its users' folders and notaries). */
export interface IViewerTrust {
  /** Whether trust in the notebook at `path` (the root's name) is each viewer's own. */
  perViewer(path: string): boolean;
  /**
   * The notebook at `path` as `principal`'s own notary marks it (cells' `metadata.trusted`), or
   * undefined where they trust nothing there (not their folder, or through a share link).
   */
  notebook(principal: IPrincipal, path: string): Promise<unknown>;
}

/** The trusted code cells of `content` (a notebook as a viewer reads it): id to outputs. */
export function trustedOutputs(content: unknown): Map<string, string> {
  const doc = new Y.Doc();
  try {
    NOTEBOOK.fill(doc, content);
    const trusted = new Map<string, string>();
    for (const cell of cellsOf(doc)) {
      const metadata = cell.get('metadata');
      const id = cell.get('id');
      if (
        typeof id === 'string' &&
        metadata instanceof Y.Map &&
        metadata.get('trusted') === true
      ) {
        trusted.set(id, outputsOf(cell));
      }
    }
    return trusted;
  } finally {
    doc.destroy();
  }
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

function outputsOf(cell: Y.Map<unknown>): string {
  const outputs = cell.get('outputs');
  return canonicalJson(outputs instanceof Y.Array ? outputs.toJSON() : []);
}
