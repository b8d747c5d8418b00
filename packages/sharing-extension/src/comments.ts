/**
 * Comment threads on cells, stored with the room: the notebook's Y doc has a root map `comments`,
 * keyed by cell id, whose values are Y arrays of entries: comments ({id, author, text, time}, a
 * reply with `replyTo`: the id of the comment it answers) and resolutions ({..., resolves: the id of
 * a thread's first comment, resolved}). The gateway lets a comment link add its own entries, take
 * back its own, and resolve the threads it started (rooms/scopes.ts); the owner does anything; a
 * view link only reads.
 *
 * Each cell shows a count of its comments (a button in its prompt gutter) and, under it, its
 * threads with their times, replies, Resolve and Delete; the box to write one opens on demand.
 *
 * One file, though over 500 lines: the doc's comment entries and their widget on a cell are one
 * concept, and the widget's DOM building is most of it.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import type { Cell } from '@jupyterlab/cells';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import {
  ITranslator,
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { PanelLayout } from '@lumino/widgets';
import { Widget } from '@lumino/widgets';
import * as Y from 'yjs';
import { mayComment } from './api';
import { currentShare } from './visitor';

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
  /** The comment this one answers (a thread's first comment). */
  replyTo?: string;
}

/** A thread resolved (or reopened): the last one for a thread wins. */
export interface IResolution {
  id: string;
  author: string;
  text: '';
  time: string;
  /** The id of the thread's first comment. */
  resolves: string;
  resolved: boolean;
}

/** What a cell's array holds. */
export type CommentEntry = IComment | IResolution;

/** Whether an entry is a resolution. */
function isResolution(entry: CommentEntry): entry is IResolution {
  return typeof (entry as IResolution).resolves === 'string';
}

/** One thread as the page shows it: its first comment, its replies and whether it is resolved. */
export interface IThreadView {
  root: IComment;
  replies: IComment[];
  resolution?: IResolution;
}

/** The thread of one cell in the doc, made on first use. */
export function threadOf(doc: Y.Doc, cellId: string): Y.Array<CommentEntry> {
  const root = doc.getMap<Y.Array<CommentEntry>>(COMMENTS_ROOT);
  let thread = root.get(cellId);
  if (!thread) {
    thread = new Y.Array<CommentEntry>();
    root.set(cellId, thread);
  }
  return thread;
}

/** A new entry's id: unique across pages (the client id) and time. */
function entryId(doc: Y.Doc): string {
  return `${doc.clientID}-${Date.now().toString(36)}-${Math.random()
    .toString(36)
    .slice(2, 6)}`;
}

/** Adds a comment (a reply when `replyTo` names a thread's first comment) to a cell's thread. */
export function addComment(
  doc: Y.Doc,
  cellId: string,
  author: string,
  text: string,
  replyTo?: string
): IComment {
  const comment: IComment = {
    id: entryId(doc),
    author,
    text: text.slice(0, COMMENT_MAX),
    time: new Date().toISOString(),
    ...(replyTo ? { replyTo } : {})
  };
  doc.transact(() => threadOf(doc, cellId).push([comment]));
  return comment;
}

/** Resolves (or reopens) the thread that `rootId` starts. */
export function setResolved(
  doc: Y.Doc,
  cellId: string,
  author: string,
  rootId: string,
  resolved: boolean
): void {
  const entry: IResolution = {
    id: entryId(doc),
    author,
    text: '',
    time: new Date().toISOString(),
    resolves: rootId,
    resolved
  };
  doc.transact(() => threadOf(doc, cellId).push([entry]));
}

/**
 * Deletes the comment `id`; with `whole`, a thread's first comment takes its replies and
 * resolutions with it (the owner's delete: a guest may take back only their own entries).
 */
export function deleteComment(
  doc: Y.Doc,
  cellId: string,
  id: string,
  whole = false
): void {
  const thread = doc.getMap<Y.Array<CommentEntry>>(COMMENTS_ROOT).get(cellId);
  if (!thread) {
    return;
  }
  doc.transact(() => {
    const entries = thread.toArray();
    for (let index = entries.length - 1; index >= 0; index--) {
      const entry = entries[index];
      const goes =
        entry.id === id ||
        (whole &&
          (isResolution(entry)
            ? entry.resolves === id
            : (entry as IComment).replyTo === id));
      if (goes) {
        thread.delete(index, 1);
      }
    }
  });
}

/** A cell's entries as threads, oldest first (a reply whose thread is gone starts one). */
export function threadsOf(entries: readonly CommentEntry[]): IThreadView[] {
  const threads = new Map<string, IThreadView>();
  const replies: IComment[] = [];
  for (const entry of entries) {
    if (isResolution(entry)) {
      continue;
    }
    if (entry.replyTo) {
      replies.push(entry);
    } else {
      threads.set(entry.id, { root: entry, replies: [] });
    }
  }
  for (const reply of replies) {
    const thread = threads.get(reply.replyTo!);
    if (thread) {
      thread.replies.push(reply);
    } else {
      threads.set(reply.id, { root: reply, replies: [] });
    }
  }
  for (const entry of entries) {
    if (isResolution(entry)) {
      const thread = threads.get(entry.resolves);
      if (thread) {
        thread.resolution = entry;
      }
    }
  }
  return [...threads.values()];
}

/** "just now", "5 minutes ago", "yesterday"..., in the page's language. */
export function relativeTime(iso: string, now = Date.now()): string {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) {
    return '';
  }
  const seconds = Math.round((then - now) / 1000);
  if (Math.abs(seconds) < 45) {
    return new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' }).format(
      0,
      'second'
    );
  }
  const units: [Intl.RelativeTimeFormatUnit, number][] = [
    ['minute', 60],
    ['hour', 60 * 60],
    ['day', 24 * 60 * 60],
    ['week', 7 * 24 * 60 * 60]
  ];
  const format = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
  let chosen: [Intl.RelativeTimeFormatUnit, number] = units[0];
  for (const unit of units) {
    if (Math.abs(seconds) >= unit[1]) {
      chosen = unit;
    }
  }
  if (chosen[0] === 'week' && Math.abs(seconds) > 5 * 7 * 24 * 60 * 60) {
    return new Date(then).toLocaleDateString();
  }
  return format.format(Math.round(seconds / chosen[1]), chosen[0]);
}

/** Who the page is, for what it offers on comments (the gateway decides). */
export interface ICommenter {
  /** The name comments are written under. */
  author: () => string;
  /** Whether the page may write comments. */
  canWrite: boolean;
  /** The notebook's owner: resolves and deletes anyone's. */
  isOwner: boolean;
}

/**
 * The threads under one cell. Hidden while the cell has none, until {@link CommentThread.open}
 * (the cell's comment button, or "Comment on Cell") opens the box to start one.
 */
export class CommentThread extends Widget {
  constructor(
    private readonly _doc: Y.Doc,
    private readonly _cellId: string,
    private readonly _who: ICommenter,
    private readonly _trans: TranslationBundle = nullTranslator.load('ferry')
  ) {
    super();
    this.addClass('jp-FerryComments');
    this._list = document.createElement('ul');
    this._list.className = 'jp-FerryComments-list';
    this.node.append(this._list);
    this._root = this._doc.getMap<Y.Array<CommentEntry>>(COMMENTS_ROOT);
    this._root.observeDeep(this._render);
    this._render();
  }

  /** How many comments the cell has, and how many of them are in open threads. */
  get counts(): { all: number; open: number } {
    const threads = threadsOf(this._entries());
    let all = 0;
    let open = 0;
    for (const thread of threads) {
      const size = 1 + thread.replies.length;
      all += size;
      if (!thread.resolution?.resolved) {
        open += size;
      }
    }
    return { all, open };
  }

  /** Called when the entries change (the cell's count follows). */
  onChange: (() => void) | undefined;

  /** Shows the threads, and the box to write a new one (reply to `replyTo`) where the page may. */
  open(replyTo?: string): void {
    this._opened = true;
    this._replyTo = replyTo;
    this._render();
    this._form?.querySelector('input')?.focus();
  }

  /** Closes the box (and hides the threads again if there are none). */
  close(): void {
    this._opened = false;
    this._replyTo = undefined;
    this._render();
  }

  /** Opens when closed, closes when open. */
  toggle(): void {
    if (this._opened) {
      this.close();
    } else {
      this.open();
    }
  }

  get isOpen(): boolean {
    return this._opened;
  }

  dispose(): void {
    this._root.unobserveDeep(this._render);
    super.dispose();
  }

  private _entries(): CommentEntry[] {
    return this._root.get(this._cellId)?.toArray() ?? [];
  }

  private readonly _render = (): void => {
    const threads = threadsOf(this._entries());
    this.node.classList.toggle('jp-mod-empty', threads.length === 0);
    this.node.classList.toggle('jp-mod-open', this._opened);
    const now = Date.now();
    this._list.replaceChildren(
      ...threads.map(thread => this._thread(thread, now))
    );
    this._form?.remove();
    this._form = undefined;
    if (this._opened && this._who.canWrite) {
      this._form = this._makeForm();
      const target = this._replyTo
        ? this._list.querySelector<HTMLElement>(
            `[data-thread-id="${CSS.escape(this._replyTo)}"]`
          )
        : null;
      (target ?? this.node).append(this._form);
    }
    this.onChange?.();
  };

  private _thread(thread: IThreadView, now: number): HTMLElement {
    const item = document.createElement('li');
    item.className = 'jp-FerryComments-thread';
    item.dataset.threadId = thread.root.id;
    const resolved = !!thread.resolution?.resolved;
    item.classList.toggle('jp-mod-resolved', resolved);
    item.append(this._comment(thread.root, now, true, resolved));
    if (resolved) {
      const note = document.createElement('div');
      note.className = 'jp-FerryComments-resolvedNote';
      note.textContent = this._trans.__(
        'Resolved by %1 · %2',
        thread.resolution!.author,
        relativeTime(thread.resolution!.time, now)
      );
      item.append(note);
    }
    if (thread.replies.length > 0) {
      const replies = document.createElement('ul');
      replies.className = 'jp-FerryComments-replies';
      replies.append(
        ...thread.replies.map(reply => {
          const li = document.createElement('li');
          li.append(this._comment(reply, now, false, resolved));
          return li;
        })
      );
      item.append(replies);
    }
    return item;
  }

  private _comment(
    comment: IComment,
    now: number,
    isRoot: boolean,
    resolved: boolean
  ): HTMLElement {
    const trans = this._trans;
    const node = document.createElement('div');
    node.className = 'jp-FerryComments-comment';
    node.dataset.commentId = comment.id;
    const head = document.createElement('div');
    head.className = 'jp-FerryComments-head';
    const author = document.createElement('span');
    author.className = 'jp-FerryComments-author';
    author.textContent = comment.author;
    const time = document.createElement('time');
    time.className = 'jp-FerryComments-time';
    time.dateTime = comment.time;
    time.textContent = relativeTime(comment.time, now);
    const when = new Date(comment.time);
    time.title = Number.isNaN(when.getTime()) ? '' : when.toLocaleString();
    head.append(author, time);
    const text = document.createElement('div');
    text.className = 'jp-FerryComments-text';
    text.textContent = comment.text;
    const actions = document.createElement('div');
    actions.className = 'jp-FerryComments-actions';
    const mine = comment.author === this._who.author();
    const button = (label: string, name: string, act: () => void) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = `jp-FerryComments-action jp-FerryComments-${name}`;
      b.textContent = label;
      b.addEventListener('click', event => {
        event.stopPropagation();
        act();
      });
      actions.append(b);
    };
    if (isRoot && this._who.canWrite && !resolved) {
      button(trans.__('Reply'), 'reply', () => this.open(comment.id));
    }
    if (isRoot && this._who.canWrite && (mine || this._who.isOwner)) {
      button(
        resolved ? trans.__('Reopen') : trans.__('Resolve'),
        'resolve',
        () =>
          setResolved(
            this._doc,
            this._cellId,
            this._who.author(),
            comment.id,
            !resolved
          )
      );
    }
    if (this._who.canWrite && (mine || this._who.isOwner)) {
      button(trans.__('Delete'), 'delete', () =>
        deleteComment(
          this._doc,
          this._cellId,
          comment.id,
          isRoot && this._who.isOwner
        )
      );
    }
    node.append(head, text, actions);
    return node;
  }

  private _makeForm(): HTMLFormElement {
    const trans = this._trans;
    const form = document.createElement('form');
    form.className = 'jp-FerryComments-form';
    const input = document.createElement('input');
    input.className = 'jp-mod-styled jp-FerryComments-input';
    const label = this._replyTo
      ? trans.__('Reply to this comment')
      : trans.__('Comment on this cell');
    input.placeholder = label;
    input.maxLength = COMMENT_MAX;
    input.setAttribute('aria-label', label);
    // The notebook must not take these keys as its shortcuts (Enter, arrows, "a", "b"...).
    input.addEventListener('keydown', event => {
      event.stopPropagation();
      if (event.key === 'Escape') {
        this.close();
      }
    });
    const cancel = document.createElement('button');
    cancel.type = 'button';
    cancel.className = 'jp-mod-styled jp-FerryComments-cancel';
    cancel.textContent = trans.__('Cancel');
    cancel.addEventListener('click', () => this.close());
    const send = document.createElement('button');
    send.type = 'submit';
    send.className = 'jp-mod-styled jp-mod-accept jp-FerryComments-send';
    send.textContent = this._replyTo ? trans.__('Reply') : trans.__('Comment');
    form.append(input, cancel, send);
    form.addEventListener('submit', event => {
      event.preventDefault();
      const text = input.value.trim();
      if (text) {
        const replyTo = this._replyTo;
        this._opened = false;
        this._replyTo = undefined;
        addComment(this._doc, this._cellId, this._who.author(), text, replyTo);
        input.value = '';
        this._render();
      }
    });
    return form;
  }

  private readonly _list: HTMLUListElement;
  private readonly _root: Y.Map<Y.Array<CommentEntry>>;
  private _form: HTMLFormElement | undefined;
  private _opened = false;
  private _replyTo: string | undefined;
}

/** The count of a cell's comments, in its prompt gutter; a click opens its threads. */
export class CommentBadge {
  constructor(
    private readonly _thread: CommentThread,
    private readonly _canWrite: boolean,
    private readonly _trans: TranslationBundle = nullTranslator.load('ferry')
  ) {
    const button = (this.node = document.createElement('button'));
    button.type = 'button';
    button.className = 'jp-FerryComments-badge';
    button.addEventListener('click', event => {
      event.stopPropagation();
      this._thread.toggle();
    });
    // A click must not also select the cell or move the notebook's focus first.
    button.addEventListener('mousedown', event => event.stopPropagation());
    this.refresh();
  }

  /** The button (in the cell's node: the notebook may draw its cells lazily, so not a widget). */
  readonly node: HTMLButtonElement;

  /** Draws the count again. */
  refresh(): void {
    const { all, open } = this._thread.counts;
    const node = this.node;
    node.classList.toggle('jp-mod-empty', all === 0);
    node.classList.toggle('jp-mod-resolved', all > 0 && open === 0);
    node.classList.toggle('jp-mod-readOnly', !this._canWrite);
    node.textContent = all === 0 ? '+' : String(all);
    const label =
      all === 0
        ? this._trans.__('Add a comment')
        : this._trans._n('%1 comment', '%1 comments', all);
    node.setAttribute('aria-label', label);
    node.title =
      all > 0 && open === 0 ? this._trans.__('%1, resolved', label) : label;
  }
}

/**
 * Shows each cell's comment count and threads in a notebook in a room, also for cells added later.
 * Returns the thread of a cell (for "Comment on Cell").
 */
export function showComments(
  panel: NotebookPanel,
  who: ICommenter,
  trans: TranslationBundle = nullTranslator.load('ferry')
): (cell: Cell) => CommentThread | undefined {
  const threads = new WeakMap<Cell, CommentThread>();
  const attach = () => {
    const doc = (panel.context.model.sharedModel as { ydoc?: Y.Doc }).ydoc;
    if (!doc) {
      return;
    }
    for (const cell of panel.content.widgets) {
      if (threads.has(cell) || cell.isDisposed) {
        continue;
      }
      const thread = new CommentThread(
        doc,
        cell.model.sharedModel.getId(),
        who,
        trans
      );
      threads.set(cell, thread);
      (cell.layout as PanelLayout).addWidget(thread);
      const badge = new CommentBadge(thread, who.canWrite, trans);
      thread.onChange = () => badge.refresh();
      cell.node.append(badge.node);
    }
  };
  void panel.context.ready.then(() => {
    attach();
    panel.content.model?.cells.changed.connect(attach);
  });
  return cell => threads.get(cell);
}

/** The command that opens the active cell's comments. */
const COMMENT_COMMAND = 'ferry:comment-cell';

/** Comment threads on the cells of notebooks in a room (written by the owner and comment+ links). */
export const commentsPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:comments',
  description:
    'Shows comment threads on cells, stored with the room, with a count on each cell; the owner and comment and edit links add, reply, resolve and delete.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator],
  activate: async (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    translator: ITranslator | null
  ): Promise<void> => {
    const trans = (translator ?? nullTranslator).load('ferry');
    const share = await currentShare(app);
    const user = app.serviceManager.user;
    const who: ICommenter = {
      author: () =>
        user.identity?.display_name ||
        user.identity?.name ||
        trans.__('Anonymous'),
      canWrite: share ? mayComment(share.scope) : true,
      isOwner: !share
    };
    const lookups = new WeakMap<
      NotebookPanel,
      (cell: Cell) => CommentThread | undefined
    >();
    const show = (panel: NotebookPanel) =>
      lookups.set(panel, showComments(panel, who, trans));
    tracker.widgetAdded.connect((_, panel) => show(panel));
    tracker.forEach(show);
    app.commands.addCommand(COMMENT_COMMAND, {
      label: trans.__('Comment on Cell'),
      caption: trans.__("Open the active cell's comments to write one"),
      isEnabled: () => who.canWrite && !!tracker.activeCell,
      execute: () => {
        const panel = tracker.currentWidget;
        const cell = tracker.activeCell;
        if (panel && cell) {
          lookups.get(panel)?.(cell)?.open();
        }
      }
    });
    app.contextMenu.addItem({
      command: COMMENT_COMMAND,
      selector: '.jp-Notebook .jp-Cell',
      rank: 12
    });
  }
};
