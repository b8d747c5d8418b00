/**
 * The lists of things a user may revoke (share links, grants to people, API tokens) and the one
 * look at a secret made just now: one component each, so that the Share dialog and the API tokens
 * panel render, ask and copy the same way.
 */
import { Clipboard } from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';

/**
 * A list of items, each a few lines of text and a Revoke button; where a question is set, Revoke
 * asks it in place (the list lives in a dialog, and JupyterLab shows one dialog at a time).
 */
export class RevocableList<T> {
  constructor(options: RevocableList.IOptions<T>) {
    this._options = options;
    this.node = document.createElement('ul');
    this.node.className = options.listClass;
  }

  /** The list's element. */
  readonly node: HTMLUListElement;

  /** Whether a question is open: a refresh would redraw the list under it. */
  get asking(): boolean {
    return this._asking;
  }

  /** Show `items` (the last ones shown when not given). */
  render(items: readonly T[] = this._items): void {
    const { trans, itemClass, dataKey, emptyText, revokeClass, parts } =
      this._options;
    this._items = items;
    this._asking = false;
    this.node.replaceChildren();
    if (items.length === 0 && emptyText !== undefined) {
      const empty = document.createElement('li');
      empty.className = this._options.emptyClass ?? '';
      empty.textContent = emptyText;
      this.node.append(empty);
      return;
    }
    for (const entry of items) {
      const item = document.createElement('li');
      item.className = itemClass;
      item.dataset[dataKey] = this._options.id(entry);
      for (const part of parts(entry)) {
        if (part instanceof HTMLElement) {
          item.append(part);
          continue;
        }
        const span = document.createElement('span');
        if (part.className) {
          span.className = part.className;
        }
        span.textContent = part.text;
        item.append(span);
      }
      const revoke = document.createElement('button');
      revoke.type = 'button';
      revoke.className = `jp-mod-styled jp-mod-warn ${revokeClass}`;
      revoke.textContent = trans.__('Revoke');
      revoke.addEventListener('click', () => this._ask(revoke, entry));
      item.append(revoke);
      this.node.append(item);
    }
  }

  /** Revoke at once, or replace the button with the question: revoke now, or keep. */
  private _ask(button: HTMLButtonElement, entry: T): void {
    const { trans, question, revoke } = this._options;
    if (!question) {
      void revoke(entry);
      return;
    }
    const group = document.createElement('div');
    group.className = question.className;
    group.setAttribute('role', 'group');
    if (question.label) {
      group.setAttribute('aria-label', question.label);
    }
    const text = document.createElement('span');
    text.textContent = question.text;
    const confirm = document.createElement('button');
    confirm.type = 'button';
    confirm.className = 'jp-mod-styled jp-mod-warn';
    confirm.textContent = trans.__('Revoke now');
    const keep = document.createElement('button');
    keep.type = 'button';
    keep.className = 'jp-mod-styled';
    keep.textContent = trans.__('Keep');
    group.append(text, confirm, keep);
    button.replaceWith(group);
    this._asking = true;
    keep.addEventListener('click', () => this.render());
    confirm.addEventListener('click', () => {
      this._asking = false;
      void revoke(entry);
    });
  }

  private readonly _options: RevocableList.IOptions<T>;
  private _items: readonly T[] = [];
  private _asking = false;
}

export namespace RevocableList {
  /** One line of an item: its text and the class that styles (and tests find) it. */
  export interface IPart {
    className?: string;
    text: string;
  }

  export interface IOptions<T> {
    trans: TranslationBundle;
    /** The class of the list, of each item, of the Revoke button. */
    listClass: string;
    itemClass: string;
    revokeClass: string;
    /** The `data-` key holding each item's id (`shareId` is `data-share-id`). */
    dataKey: string;
    id(item: T): string;
    /** An item's lines (or elements of its own, such as a button), before its Revoke button. */
    parts(item: T): (IPart | HTMLElement)[];
    /** What an empty list says (and the class of that line); nothing when not given. */
    emptyText?: string;
    emptyClass?: string;
    /** The question asked before revoking; revoked at once when not given. */
    question?: { text: string; label?: string; className: string };
    revoke(item: T): void | Promise<void>;
  }
}

/**
 * Show a secret made just now (a link, a token) in `container`: what it is, the secret in a
 * read-only field that selects itself, and a Copy button.
 */
export function showSecret(
  container: HTMLElement,
  options: {
    trans: TranslationBundle;
    text: string;
    value: string;
    label: string;
    inputClass: string;
    copyClass: string;
  }
): void {
  const { trans, value } = options;
  const note = document.createElement('p');
  note.textContent = options.text;
  const field = document.createElement('input');
  field.className = `jp-mod-styled ${options.inputClass}`;
  field.readOnly = true;
  field.value = value;
  field.setAttribute('aria-label', options.label);
  field.addEventListener('focus', () => field.select());
  const copy = document.createElement('button');
  copy.type = 'button';
  copy.className = `jp-mod-styled ${options.copyClass}`;
  copy.textContent = trans.__('Copy');
  copy.addEventListener('click', () => {
    Clipboard.copyToSystem(value);
    copy.textContent = trans.__('Copied');
  });
  container.replaceChildren(note, field, copy);
}
