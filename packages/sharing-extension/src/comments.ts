/**
 * Comment threads on cells, stored with the room: the notebook's Y doc has a root map `comments`,
 * keyed by cell id, whose values are Y arrays of comments ({id, author, text, time}). The gateway
 * lets a comment link change that map and nothing else; a view link only reads it. Each cell shows
 * its thread under it, with a box to add to it where the page may.
 */
import type { Cell } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import {
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { PanelLayout } from '@lumino/widgets';
import { Widget } from '@lumino/widgets';
import * as Y from 'yjs';

/** The name of the Y doc's root map of threads. */
export const COMMENTS_ROOT = 'comments';

/** The most characters of one comment. */
const COMMENT_MAX = 2000;

/** One comment of a cell's thread. */
export interface IComment {
  id: string;
  author: string;
  text: string;
  /** ISO 8601. */
  time: string;
}

/** The thread of one cell in the doc, made on first use. */
export function threadOf(doc: Y.Doc, cellId: string): Y.Array<IComment> {
  const root = doc.getMap<Y.Array<IComment>>(COMMENTS_ROOT);
  let thread = root.get(cellId);
  if (!thread) {
    thread = new Y.Array<IComment>();
    root.set(cellId, thread);
  }
  return thread;
}

/** Adds a comment to a cell's thread. */
export function addComment(
  doc: Y.Doc,
  cellId: string,
  author: string,
  text: string
): IComment {
  const comment: IComment = {
    id: `${doc.clientID}-${Date.now().toString(36)}`,
    author,
    text: text.slice(0, COMMENT_MAX),
    time: new Date().toISOString()
  };
  doc.transact(() => threadOf(doc, cellId).push([comment]));
  return comment;
}

/** The thread under one cell: its comments, and a box to add one when `canWrite`. */
export class CommentThread extends Widget {
  constructor(
    private readonly _doc: Y.Doc,
    private readonly _cellId: string,
    private readonly _author: () => string,
    canWrite: boolean,
    trans: TranslationBundle = nullTranslator.load('ferry')
  ) {
    super();
    this.addClass('jp-FerryComments');
    this._list = document.createElement('ul');
    this._list.className = 'jp-FerryComments-list';
    this.node.append(this._list);
    if (canWrite) {
      const form = document.createElement('form');
      form.className = 'jp-FerryComments-form';
      const input = document.createElement('input');
      input.className = 'jp-mod-styled jp-FerryComments-input';
      input.placeholder = trans.__('Comment on this cell');
      input.maxLength = COMMENT_MAX;
      input.setAttribute('aria-label', trans.__('Comment on this cell'));
      // The notebook must not take these keys as its shortcuts (Enter, arrows, "a", "b"...).
      input.addEventListener('keydown', event => event.stopPropagation());
      form.append(input);
      form.addEventListener('submit', event => {
        event.preventDefault();
        const text = input.value.trim();
        if (text) {
          addComment(this._doc, this._cellId, this._author(), text);
          input.value = '';
        }
      });
      this.node.append(form);
    }
    this._root = this._doc.getMap<Y.Array<IComment>>(COMMENTS_ROOT);
    this._root.observeDeep(this._render);
    this._render();
  }

  dispose(): void {
    this._root.unobserveDeep(this._render);
    super.dispose();
  }

  private readonly _render = (): void => {
    const comments = this._root.get(this._cellId)?.toArray() ?? [];
    this.node.classList.toggle('jp-mod-empty', comments.length === 0);
    this._list.replaceChildren(
      ...comments.map(comment => {
        const item = document.createElement('li');
        item.className = 'jp-FerryComments-comment';
        const author = document.createElement('span');
        author.className = 'jp-FerryComments-author';
        author.textContent = comment.author;
        const text = document.createElement('span');
        text.className = 'jp-FerryComments-text';
        text.textContent = comment.text;
        item.title = new Date(comment.time).toLocaleString();
        item.append(author, text);
        return item;
      })
    );
  };

  private readonly _list: HTMLUListElement;
  private readonly _root: Y.Map<Y.Array<IComment>>;
}

/**
 * Shows a thread under every code and markdown cell of a notebook in a room, also under cells
 * added later.
 */
export function showComments(
  panel: NotebookPanel,
  author: () => string,
  canWrite: boolean,
  trans: TranslationBundle = nullTranslator.load('ferry')
): void {
  const threads = new WeakSet<Cell>();
  const attach = () => {
    const doc = (panel.context.model.sharedModel as { ydoc?: Y.Doc }).ydoc;
    if (!doc) {
      return;
    }
    for (const cell of panel.content.widgets) {
      if (threads.has(cell) || cell.isDisposed) {
        continue;
      }
      threads.add(cell);
      const thread = new CommentThread(
        doc,
        cell.model.sharedModel.getId(),
        author,
        canWrite,
        trans
      );
      (cell.layout as PanelLayout).addWidget(thread);
    }
  };
  void panel.context.ready.then(() => {
    attach();
    panel.content.model?.cells.changed.connect(attach);
  });
}
