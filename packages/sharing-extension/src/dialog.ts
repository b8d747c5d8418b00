/**
 * The Share dialog's body: create a link to this notebook (scope, expiry, label), see its URL once
 * with Copy, and the notebook's links with who is connected through each, each with Revoke.
 */
import { Clipboard, Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';
import {
  SCOPES,
  type ICreatedShare,
  type IShare,
  type ShareScope,
  type SharesClient
} from './api';

/** What each scope lets a visitor do, in words. */
export const SCOPE_DESCRIPTIONS: Record<ShareScope, string> = {
  view: 'View: sees the notebook live',
  comment: 'Comment: views and writes comments on cells',
  run: 'Run: views and runs cells on your kernel, no edits',
  edit: 'Edit: edits with you and runs cells'
};

/** The expiries offered, in seconds (0: never). */
const EXPIRIES: readonly [string, number][] = [
  ['Never expires', 0],
  ['Expires in 1 hour', 3600],
  ['Expires in 1 day', 86400],
  ['Expires in 7 days', 7 * 86400]
];

/** How often the list of links (and their visitors) is refreshed while the dialog is open. */
const REFRESH_MS = 5000;

/** The Share dialog's body for one notebook. */
export class SharePanel extends Widget {
  constructor(
    private readonly _client: SharesClient,
    readonly path: string
  ) {
    super();
    this.addClass('jp-FerryShare');
    const form = document.createElement('form');
    form.className = 'jp-FerryShare-form';
    this._scope = document.createElement('select');
    this._scope.className = 'jp-mod-styled jp-FerryShare-scope';
    this._scope.setAttribute('aria-label', 'Scope');
    for (const scope of SCOPES) {
      const option = document.createElement('option');
      option.value = scope;
      option.textContent = SCOPE_DESCRIPTIONS[scope];
      this._scope.append(option);
    }
    this._expiry = document.createElement('select');
    this._expiry.className = 'jp-mod-styled jp-FerryShare-expiry';
    this._expiry.setAttribute('aria-label', 'Expiry');
    for (const [label, seconds] of EXPIRIES) {
      const option = document.createElement('option');
      option.value = String(seconds);
      option.textContent = label;
      this._expiry.append(option);
    }
    this._label = document.createElement('input');
    this._label.className = 'jp-mod-styled jp-FerryShare-label';
    this._label.placeholder = 'Label (who it is for)';
    this._label.maxLength = 100;
    this._label.setAttribute('aria-label', 'Label');
    const create = document.createElement('button');
    create.type = 'submit';
    create.className = 'jp-mod-styled jp-mod-accept jp-FerryShare-create';
    create.textContent = 'Create link';
    form.append(this._scope, this._expiry, this._label, create);
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this._create();
    });

    this._created = document.createElement('div');
    this._created.className = 'jp-FerryShare-created';
    this._error = document.createElement('div');
    this._error.className = 'jp-FerryShare-error';
    this._error.setAttribute('role', 'alert');
    const heading = document.createElement('h3');
    heading.textContent = 'Links to this notebook';
    this._list = document.createElement('ul');
    this._list.className = 'jp-FerryShare-links';
    this.node.append(form, this._created, this._error, heading, this._list);
  }

  /** The links shown last. */
  get links(): readonly IShare[] {
    return this._links;
  }

  /** Reloads the list of this notebook's links. */
  async refresh(): Promise<void> {
    try {
      this._links = await this._client.list(this.path);
      if (!this._asking) {
        this._renderList();
      }
    } catch (error) {
      this._showError(error);
    }
  }

  protected onAfterAttach(): void {
    void this.refresh();
    this._timer = window.setInterval(() => void this.refresh(), REFRESH_MS);
  }

  protected onBeforeDetach(): void {
    window.clearInterval(this._timer);
  }

  private async _create(): Promise<void> {
    this._showError(undefined);
    const expiresIn = Number(this._expiry.value);
    const label = this._label.value.trim();
    try {
      const share = await this._client.create({
        path: this.path,
        scope: this._scope.value as ShareScope,
        ...(expiresIn > 0 ? { expiresIn } : {}),
        ...(label ? { label } : {})
      });
      this._showCreated(share);
      this._label.value = '';
      await this.refresh();
    } catch (error) {
      this._showError(error);
    }
  }

  private _showCreated(share: ICreatedShare): void {
    this._created.replaceChildren();
    const note = document.createElement('p');
    note.textContent = `Anyone with this link can ${share.scope} this notebook. It is shown only now: copy it.`;
    const url = document.createElement('input');
    url.className = 'jp-mod-styled jp-FerryShare-url';
    url.readOnly = true;
    url.value = share.url;
    url.setAttribute('aria-label', 'Link');
    url.addEventListener('focus', () => url.select());
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'jp-mod-styled jp-FerryShare-copy';
    copy.textContent = 'Copy';
    copy.addEventListener('click', () => {
      Clipboard.copyToSystem(share.url);
      copy.textContent = 'Copied';
    });
    this._created.append(note, url, copy);
  }

  private _renderList(): void {
    this._list.replaceChildren();
    if (this._links.length === 0) {
      const empty = document.createElement('li');
      empty.className = 'jp-FerryShare-empty';
      empty.textContent = 'No links yet.';
      this._list.append(empty);
      return;
    }
    for (const share of this._links) {
      const item = document.createElement('li');
      item.className = 'jp-FerryShare-link';
      item.dataset.shareId = share.id;
      const title = document.createElement('span');
      title.className = 'jp-FerryShare-linkTitle';
      title.textContent = `${share.label || 'Unlabelled link'} · ${share.scope}`;
      const expiry = document.createElement('span');
      expiry.className = 'jp-FerryShare-linkExpiry';
      expiry.textContent = share.expiresAt
        ? `expires ${new Date(share.expiresAt).toLocaleString()}`
        : 'no expiry';
      const visitors = document.createElement('span');
      visitors.className = 'jp-FerryShare-visitors';
      const names = (share.visitors ?? []).map(visitor => visitor.name);
      visitors.textContent =
        names.length > 0
          ? `connected: ${names.join(', ')}`
          : 'nobody connected';
      const revoke = document.createElement('button');
      revoke.type = 'button';
      revoke.className = 'jp-mod-styled jp-mod-warn jp-FerryShare-revoke';
      revoke.textContent = 'Revoke';
      // Asked in place: the Share dialog is itself a dialog, and JupyterLab shows one at a time.
      revoke.addEventListener('click', () => this._askRevoke(item, share));
      item.append(title, expiry, visitors, revoke);
      this._list.append(item);
    }
  }

  /** Replaces a link's Revoke button with the question: revoke it now, or keep it. */
  private _askRevoke(item: HTMLElement, share: IShare): void {
    const question = document.createElement('div');
    question.className = 'jp-FerryShare-confirm';
    question.setAttribute('role', 'group');
    question.setAttribute('aria-label', 'Revoke this link?');
    const text = document.createElement('span');
    text.textContent =
      'Revoke this link? It stops working now and its visitors are disconnected.';
    const confirm = document.createElement('button');
    confirm.type = 'button';
    confirm.className = 'jp-mod-styled jp-mod-warn';
    confirm.textContent = 'Revoke now';
    const keep = document.createElement('button');
    keep.type = 'button';
    keep.className = 'jp-mod-styled';
    keep.textContent = 'Keep';
    question.append(text, confirm, keep);
    item.querySelector('.jp-FerryShare-revoke')?.replaceWith(question);
    // The periodic refresh would redraw the list under the question: hold it meanwhile.
    this._asking = true;
    keep.addEventListener('click', () => {
      this._asking = false;
      this._renderList();
    });
    confirm.addEventListener('click', () => {
      this._asking = false;
      void this._revoke(share);
    });
  }

  private async _revoke(share: IShare): Promise<void> {
    try {
      await this._client.revoke(share.id);
    } catch (error) {
      this._showError(error);
    }
    await this.refresh();
  }

  private _showError(error: unknown): void {
    this._error.textContent =
      error === undefined
        ? ''
        : error instanceof Error
          ? error.message
          : String(error);
  }

  private readonly _scope: HTMLSelectElement;
  private readonly _expiry: HTMLSelectElement;
  private readonly _label: HTMLInputElement;
  private readonly _created: HTMLDivElement;
  private readonly _error: HTMLDivElement;
  private readonly _list: HTMLUListElement;
  private _links: IShare[] = [];
  private _timer = 0;
  private _asking = false;
}

/** Opens the Share dialog for a notebook. */
export async function showShareDialog(
  client: SharesClient,
  path: string
): Promise<void> {
  await showDialog({
    title: `Share ${path}`,
    body: new SharePanel(client, path),
    buttons: [Dialog.okButton({ label: 'Done' })]
  });
}
