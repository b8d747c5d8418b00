/**
 * One file, though long: one dialog body (links, people, who is connected) whose parts share its
 * state and refresh together.
 *
 * The Share dialog's body: create a link to this notebook (scope, expiry, label), see its URL once
 * with Copy, and the notebook's links with who is connected through each, each with Revoke; where
 * people sign in, share it with a user or a group by name beside links ("People and groups").
 */
import { Clipboard, Dialog, showDialog } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import {
  nullTranslator,
  type ITranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';
import {
  errorText,
  mayRun,
  SCOPES,
  type IConfinementSupport,
  type ICreatedShare,
  type IShare,
  type ShareScope,
  type SharesClient
} from './api';
import { RevocableList, showSecret } from './revocable-list';

/** What each scope lets a visitor do, in words. */
export function scopeDescriptions(
  trans: TranslationBundle
): Record<ShareScope, string> {
  return {
    view: trans.__('View: sees the notebook live'),
    comment: trans.__('Comment: views and writes comments on cells'),
    run: trans.__('Run: views and runs cells on your kernel, no edits'),
    edit: trans.__('Edit: edits with you and runs cells')
  };
}

/** What a run or edit link means, said before one is made. */
export function runWarning(trans: TranslationBundle): string {
  return trans.__(
    "Whoever holds a run or edit link runs code in your kernel, with your kernel's file access: it can read any file your kernel can (your other notebooks, .git, keys), not only this notebook."
  );
}

/** Sharing with people by name, against links: whose kernel runs their code. */
export function ownRuntimeNote(trans: TranslationBundle): string {
  return trans.__(
    'Run and edit links, and run and edit shares with people, execute code in your kernel with your file access. A signed-in person you share with can instead choose "Run in my own runtime": a copy in their own folder, on a kernel of their own, which cannot read your files.'
  );
}

/** {@link runWarning} in English. */
export const RUN_WARNING = runWarning(nullTranslator.load('ferry'));

/**
 * The longest label the gateway takes: schema `ShareRequest`'s `label.maxLength` (dialog.spec holds
 * the two equal, for the types generated from the schema carry no lengths).
 */
const LABEL_MAX_LENGTH = 200;

/** How often the list of links (and their visitors) is refreshed while the dialog is open. */
const REFRESH_MS = 5000;

/** The Share dialog's body for one notebook. */
export class SharePanel extends Widget {
  constructor(
    private readonly _client: SharesClient,
    readonly path: string,
    translator: ITranslator = nullTranslator
  ) {
    super();
    const trans = (this._trans = translator.load('ferry'));
    this.addClass('jp-FerryShare');
    const form = document.createElement('form');
    form.className = 'jp-FerryShare-form';
    this._scope = document.createElement('select');
    this._scope.className = 'jp-mod-styled jp-FerryShare-scope';
    this._scope.setAttribute('aria-label', trans.__('Scope'));
    const descriptions = scopeDescriptions(trans);
    for (const scope of SCOPES) {
      const option = document.createElement('option');
      option.value = scope;
      option.textContent = descriptions[scope];
      this._scope.append(option);
    }
    this._expiry = document.createElement('select');
    this._expiry.className = 'jp-mod-styled jp-FerryShare-expiry';
    this._expiry.setAttribute('aria-label', trans.__('Expiry'));
    for (const [label, seconds] of Private.expiries(trans)) {
      const option = document.createElement('option');
      option.value = String(seconds);
      option.textContent = label;
      this._expiry.append(option);
    }
    this._label = document.createElement('input');
    this._label.className = 'jp-mod-styled jp-FerryShare-label';
    this._label.placeholder = trans.__('Label (who it is for)');
    this._label.maxLength = LABEL_MAX_LENGTH;
    this._label.setAttribute('aria-label', trans.__('Label'));
    const create = document.createElement('button');
    create.type = 'submit';
    create.className = 'jp-mod-styled jp-mod-accept jp-FerryShare-create';
    create.textContent = trans.__('Create link');
    this._scope.addEventListener('change', () => this._renderRunWarning());

    // What a run or edit link means, before it is made, and the kernel's confinement.
    this._runWarning = document.createElement('div');
    this._runWarning.className = 'jp-FerryShare-runWarning';
    this._runWarning.setAttribute('role', 'note');
    const warning = document.createElement('p');
    warning.className = 'jp-FerryShare-runWarningText';
    warning.textContent = runWarning(trans);
    const confineLabel = document.createElement('label');
    confineLabel.className = 'jp-FerryShare-confineLabel';
    this._confine = document.createElement('input');
    this._confine.type = 'checkbox';
    this._confine.className = 'jp-FerryShare-confine';
    // Until the gateway says it can: off and disabled, not promised.
    this._confine.checked = false;
    this._confine.disabled = true;
    confineLabel.append(
      this._confine,
      ' ' + trans.__("Confine this notebook's kernel to its folder")
    );
    this._confineHint = document.createElement('p');
    this._confineHint.className = 'jp-FerryShare-confineHint';
    this._confineHint.textContent = trans.__(
      'Asking the server whether it can…'
    );
    this._runWarning.append(warning, confineLabel, this._confineHint);

    form.append(
      this._scope,
      this._expiry,
      this._label,
      create,
      this._runWarning
    );
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
    heading.textContent = trans.__('Links to this notebook');
    this._list = new RevocableList<IShare>({
      trans,
      listClass: 'jp-FerryShare-links',
      itemClass: 'jp-FerryShare-link',
      revokeClass: 'jp-FerryShare-revoke',
      dataKey: 'shareId',
      id: share => share.id,
      emptyText: trans.__('No links yet.'),
      emptyClass: 'jp-FerryShare-empty',
      parts: share => [
        {
          className: 'jp-FerryShare-linkTitle',
          text:
            `${share.label || trans.__('Unlabelled link')} · ${share.scope}` +
            (share.confine
              ? ' · ' + trans.__('kernel confined to its folder')
              : '')
        },
        {
          className: 'jp-FerryShare-linkExpiry',
          text: share.expiresAt
            ? trans.__('expires %1', new Date(share.expiresAt).toLocaleString())
            : trans.__('no expiry')
        },
        Private.visitors(share, trans)
      ],
      question: {
        className: 'jp-FerryShare-confirm',
        label: trans.__('Revoke this link?'),
        text: trans.__(
          'Revoke this link? It stops working now and its visitors are disconnected.'
        )
      },
      revoke: share => this._revoke(share)
    });
    this._people = this._peopleSection();
    this.node.append(
      form,
      this._created,
      this._error,
      heading,
      this._list.node,
      this._people
    );
  }

  /** The grants to people shown last; undefined where nobody signs in (the section is hidden). */
  get grants(): readonly IShare[] | undefined {
    return this._grants;
  }

  /** The "People and groups" section: share by name beside links (hidden until the server offers it). */
  private _peopleSection(): HTMLElement {
    const trans = this._trans;
    const section = document.createElement('section');
    section.className = 'jp-FerryShare-people';
    section.hidden = true;
    const heading = document.createElement('h3');
    heading.textContent = trans.__('People and groups');
    const form = document.createElement('form');
    form.className = 'jp-FerryShare-peopleForm';
    this._kind = document.createElement('select');
    this._kind.className = 'jp-mod-styled jp-FerryShare-kind';
    this._kind.setAttribute('aria-label', trans.__('User or group'));
    for (const [value, label] of [
      ['user', trans.__('User')],
      ['group', trans.__('Group')]
    ]) {
      const option = document.createElement('option');
      option.value = value;
      option.textContent = label;
      this._kind.append(option);
    }
    this._who = document.createElement('input');
    this._who.className = 'jp-mod-styled jp-FerryShare-who';
    this._who.placeholder = trans.__('Name of a user or a group');
    // Not `required`: JupyterLab's dialog disables Done while any input in it is :invalid, and an
    // empty name (nobody to share with yet) is no error. An empty Share is answered below.
    this._who.setAttribute('aria-label', trans.__('Name of the user or group'));
    this._peopleScope = document.createElement('select');
    this._peopleScope.className = 'jp-mod-styled jp-FerryShare-peopleScope';
    this._peopleScope.setAttribute(
      'aria-label',
      trans.__('Permission for the user or group')
    );
    const descriptions = scopeDescriptions(trans);
    for (const scope of SCOPES) {
      const option = document.createElement('option');
      option.value = scope;
      option.textContent = descriptions[scope];
      this._peopleScope.append(option);
    }
    const share = document.createElement('button');
    share.type = 'submit';
    share.className = 'jp-mod-styled jp-mod-accept jp-FerryShare-shareWith';
    share.textContent = trans.__('Share');
    const note = document.createElement('p');
    note.className = 'jp-FerryShare-ownRuntime';
    note.setAttribute('role', 'note');
    note.textContent = ownRuntimeNote(trans);
    form.append(this._kind, this._who, this._peopleScope, share);
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this._shareWith();
    });
    this._grantList = new RevocableList<IShare>({
      trans,
      listClass: 'jp-FerryShare-grants',
      itemClass: 'jp-FerryShare-grant',
      revokeClass: 'jp-FerryShare-revoke',
      dataKey: 'shareId',
      id: grant => grant.id,
      parts: grant => [
        {
          text: `${
            grant.recipient?.kind === 'group'
              ? trans.__('group %1', grant.recipient.name)
              : (grant.recipient?.name ?? '')
          } · ${grant.scope}`
        },
        Private.visitors(grant, trans),
        this._copyAddress(grant)
      ],
      revoke: grant =>
        this._client
          .revokePeople(grant.id)
          .catch(error => this._showError(error))
          .then(() => this.refresh())
    });
    section.append(heading, form, note, this._grantList.node);
    return section;
  }

  private async _shareWith(): Promise<void> {
    this._showError(undefined);
    const name = this._who.value.trim();
    if (!name) {
      this._who.focus();
      return;
    }
    try {
      await this._client.shareWith({
        path: this.path,
        scope: this._peopleScope.value as ShareScope,
        ...(this._kind.value === 'group' ? { group: name } : { user: name })
      });
      this._who.value = '';
      await this.refresh();
    } catch (error) {
      this._showError(error);
    }
  }

  /** The address to send a grant's recipient: it opens the notebook once they sign in. */
  private _copyAddress(grant: IShare): HTMLButtonElement {
    const trans = this._trans;
    const address = `${URLExt.join(this._client.serverSettings.baseUrl, 'share')}#grant:${grant.id}`;
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'jp-mod-styled jp-FerryShare-copyAddress';
    copy.textContent = trans.__('Copy address');
    copy.title = address;
    copy.addEventListener('click', () => {
      Clipboard.copyToSystem(address);
      copy.textContent = trans.__('Copied');
    });
    return copy;
  }

  private _renderGrants(): void {
    this._people.hidden = this._grants === undefined;
    this._grantList.render(this._grants ?? []);
  }

  /** The links shown last. */
  get links(): readonly IShare[] {
    return this._links;
  }

  /** Reloads the list of this notebook's links. */
  async refresh(): Promise<void> {
    try {
      this._links = await this._client.list(this.path);
      // Asked until the server says nobody here shares with people (then never again).
      if (this._peopleOffered) {
        this._grants = await this._client.listPeople(this.path);
        this._peopleOffered = this._grants !== undefined;
      }
      if (!this._list.asking) {
        this._list.render(this._links);
      }
      this._renderGrants();
    } catch (error) {
      this._showError(error);
    }
  }

  /** Whether the gateway can confine kernels: known once asked (on attach). */
  get confinement(): IConfinementSupport | undefined {
    return this._support;
  }

  /** Asks the gateway whether it can confine kernels, and offers the checkbox accordingly. */
  async checkConfinement(): Promise<void> {
    const trans = this._trans;
    try {
      this._support = await this._client.confinement();
    } catch (error) {
      this._support = {
        available: false,
        reason: trans.__(
          'the server did not say whether it can confine kernels (%1)',
          errorText(error)
        )
      };
    }
    const atRoot = !this.path.includes('/');
    if (!this._support.available) {
      this._confine.checked = false;
      this._confine.disabled = true;
      this._confineHint.textContent = trans.__(
        'Not available: %1.',
        this._support.reason ?? trans.__('unknown reason')
      );
    } else if (atRoot) {
      this._confine.checked = false;
      this._confine.disabled = true;
      this._confineHint.textContent = trans.__(
        'Not available here: this notebook is in the root folder, so its folder is all of your files. Move it into a folder of its own to confine its kernel.'
      );
    } else {
      this._confine.disabled = false;
      this._confine.checked = true;
      this._confineHint.textContent = Private.confineHint(trans);
    }
  }

  protected onAfterAttach(): void {
    this._renderRunWarning();
    void this.checkConfinement();
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
      const scope = this._scope.value as ShareScope;
      const confine =
        mayRun(scope) && !this._confine.disabled && this._confine.checked;
      const share = await this._client.create({
        path: this.path,
        scope,
        ...(confine ? { confine: true } : {}),
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
    const trans = this._trans;
    showSecret(this._created, {
      trans,
      text:
        trans.__(
          'Anyone with this link can %1 this notebook. It is shown only now: copy it.',
          share.scope
        ) +
        (mayRun(share.scope)
          ? ' ' +
            (share.confine
              ? trans.__("Its kernel sees only this notebook's folder.")
              : trans.__(
                  'It runs code in your kernel, which can read any file your kernel can.'
                ))
          : ''),
      value: share.url,
      label: trans.__('Link'),
      inputClass: 'jp-FerryShare-url',
      copyClass: 'jp-FerryShare-copy'
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

  /** The warning and the checkbox show for the scopes that run code (run and edit) only. */
  private _renderRunWarning(): void {
    this._runWarning.hidden = !mayRun(this._scope.value as ShareScope);
  }

  private _showError(error: unknown): void {
    this._error.textContent = errorText(error);
  }

  private readonly _trans: TranslationBundle;
  private readonly _scope: HTMLSelectElement;
  private readonly _expiry: HTMLSelectElement;
  private readonly _label: HTMLInputElement;
  private readonly _runWarning: HTMLDivElement;
  private readonly _confine: HTMLInputElement;
  private readonly _confineHint: HTMLParagraphElement;
  private _support: IConfinementSupport | undefined;
  private readonly _created: HTMLDivElement;
  private readonly _error: HTMLDivElement;
  private readonly _list: RevocableList<IShare>;
  private _links: IShare[] = [];
  private _grants: IShare[] | undefined;
  private _peopleOffered = true;
  private readonly _people: HTMLElement;
  private _kind!: HTMLSelectElement;
  private _who!: HTMLInputElement;
  private _peopleScope!: HTMLSelectElement;
  private _grantList!: RevocableList<IShare>;
  private _timer = 0;
}

/** Opens the Share dialog for a notebook. */
export async function showShareDialog(
  client: SharesClient,
  path: string,
  translator: ITranslator = nullTranslator
): Promise<void> {
  const trans = translator.load('ferry');
  await showDialog({
    title: trans.__('Share %1', path),
    body: new SharePanel(client, path, translator),
    buttons: [Dialog.okButton({ label: trans.__('Done') })]
  });
}

namespace Private {
  /** Who is connected through a link or grant now. */
  export function visitors(
    share: IShare,
    trans: TranslationBundle
  ): RevocableList.IPart {
    const names = (share.visitors ?? []).map(visitor => visitor.name);
    return {
      className: 'jp-FerryShare-visitors',
      text:
        names.length > 0
          ? trans.__('connected: %1', names.join(', '))
          : trans.__('nobody connected')
    };
  }

  /** The expiries offered, in seconds (0: never). */
  export function expiries(trans: TranslationBundle): [string, number][] {
    return [
      [trans.__('Never expires'), 0],
      [trans.__('Expires in 1 hour'), 3600],
      [trans.__('Expires in 1 day'), 86400],
      [trans.__('Expires in 7 days'), 7 * 86400]
    ];
  }

  /** What confinement does to the kernel, beside its checkbox. */
  export function confineHint(trans: TranslationBundle): string {
    return trans.__(
      "Your kernel then sees only this notebook's folder (read and write) and nothing else of your root directory; a kernel running now is restarted confined, and its variables are lost. It still reaches the network, /tmp, and other processes of its user."
    );
  }
}
