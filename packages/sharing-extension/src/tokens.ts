/**
 * The API tokens panel (`/api/me/tokens`): make a token for an API client (note, scope, expiry),
 * see its secret once with Copy, list one's tokens and revoke them. Opened by the "API Tokens…"
 * command (palette, Settings menu).
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Dialog, ICommandPalette, showDialog } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import {
  ITranslator,
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';
import type { RestSchemas } from '@ferry/rest-contract';
import { errorText, requestJson } from './api';
import { RevocableList, showSecret } from './revocable-list';

/** What a token may do: schema `ApiTokenScope`. */
export type ApiTokenScope = RestSchemas['ApiTokenScope'];

/** A token as listed (never its secret): schema `ApiToken`. */
export type IApiToken = RestSchemas['ApiToken'];

/** The reply to making a token, the only time its secret (`token`) is shown: schema `CreatedApiToken`. */
export type ICreatedApiToken = RestSchemas['CreatedApiToken'];

/** Talks to `/api/me/tokens` with the page's server settings. */
export class TokensClient {
  constructor(
    readonly serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  /** Makes a token; the reply holds its secret, shown once. */
  create(request: RestSchemas['ApiTokenRequest']): Promise<ICreatedApiToken> {
    return this._request('api/me/tokens', {
      method: 'POST',
      body: JSON.stringify(request)
    });
  }

  /** This user's live tokens, newest first. */
  list(): Promise<IApiToken[]> {
    return this._request('api/me/tokens', { method: 'GET' });
  }

  /** Revokes a token: the server closes its open connections at once. */
  async revoke(id: string): Promise<void> {
    await this._request<void>(`api/me/tokens/${encodeURIComponent(id)}`, {
      method: 'DELETE'
    });
  }

  private _request<T>(endpoint: string, init: RequestInit): Promise<T> {
    return requestJson<T>(this.serverSettings, endpoint, init);
  }
}

/** The longest note the gateway takes: schema `ApiTokenRequest`'s `note.maxLength`. */
const NOTE_MAX_LENGTH = 200;

/** The panel: a form to make a token, the new token's secret once, the list with Revoke. */
export class TokensPanel extends Widget {
  constructor(
    private readonly _client: TokensClient,
    translator: ITranslator = nullTranslator
  ) {
    super();
    const trans = (this._trans = translator.load('ferry'));
    this.addClass('jp-FerryTokens');
    const form = document.createElement('form');
    form.className = 'jp-FerryTokens-form';
    this._note = document.createElement('input');
    this._note.className = 'jp-mod-styled jp-FerryTokens-note';
    this._note.placeholder = trans.__('Note (what it is for)');
    this._note.maxLength = NOTE_MAX_LENGTH;
    this._note.setAttribute('aria-label', trans.__('Note'));
    this._scope = document.createElement('select');
    this._scope.className = 'jp-mod-styled jp-FerryTokens-scope';
    this._scope.setAttribute('aria-label', trans.__('Scope'));
    const scopes: [ApiTokenScope, string][] = [
      ['full', trans.__('Full: whatever you may do')],
      ['read-only', trans.__('Read-only: reads, runs and changes nothing')]
    ];
    for (const [value, label] of scopes) {
      this._scope.append(new Option(label, value));
    }
    this._expiry = document.createElement('select');
    this._expiry.className = 'jp-mod-styled jp-FerryTokens-expiry';
    this._expiry.setAttribute('aria-label', trans.__('Expiry'));
    const expiries: [string, number][] = [
      [trans.__('Expires in 7 days'), 7 * 86400],
      [trans.__('Expires in 30 days'), 30 * 86400],
      [trans.__('Expires in 1 year'), 365 * 86400],
      [trans.__('Never expires'), 0]
    ];
    for (const [label, seconds] of expiries) {
      this._expiry.append(new Option(label, String(seconds)));
    }
    const create = document.createElement('button');
    create.type = 'submit';
    create.className = 'jp-mod-styled jp-mod-accept jp-FerryTokens-create';
    create.textContent = trans.__('Create token');
    form.append(this._note, this._scope, this._expiry, create);
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this._create();
    });
    this._created = document.createElement('div');
    this._created.className = 'jp-FerryTokens-created';
    this._error = document.createElement('div');
    this._error.className = 'jp-FerryTokens-error';
    this._error.setAttribute('role', 'alert');
    const heading = document.createElement('h3');
    heading.textContent = trans.__('Your tokens');
    this._list = new RevocableList<IApiToken>({
      trans,
      listClass: 'jp-FerryTokens-list',
      itemClass: 'jp-FerryTokens-token',
      revokeClass: 'jp-FerryTokens-revoke',
      dataKey: 'tokenId',
      id: token => token.id,
      emptyText: trans.__('No tokens yet.'),
      emptyClass: 'jp-FerryTokens-empty',
      parts: token => [
        {
          className: 'jp-FerryTokens-title',
          text: `${token.note || trans.__('No note')} · ${
            token.scope === 'full' ? trans.__('full') : trans.__('read-only')
          }`
        },
        {
          className: 'jp-FerryTokens-dates',
          text: [
            trans.__('made %1', new Date(token.createdAt).toLocaleString()),
            trans.__(
              'last used %1',
              new Date(token.lastUsedAt).toLocaleString()
            ),
            token.expiresAt
              ? trans.__(
                  'expires %1',
                  new Date(token.expiresAt).toLocaleString()
                )
              : trans.__('no expiry')
          ].join(' · ')
        }
      ],
      question: {
        className: 'jp-FerryTokens-confirm',
        text: trans.__(
          'Revoke this token? It stops working now and its connections close.'
        )
      },
      revoke: token => this._revoke(token)
    });
    this.node.append(
      form,
      this._created,
      this._error,
      heading,
      this._list.node
    );
  }

  /** Reads the tokens again and redraws the list. */
  async refresh(): Promise<void> {
    try {
      this._tokens = await this._client.list();
    } catch (error) {
      this._showError(error);
    }
    this._list.render(this._tokens);
  }

  protected onAfterAttach(): void {
    void this.refresh();
  }

  private async _create(): Promise<void> {
    this._showError(undefined);
    const expiresIn = Number(this._expiry.value);
    const note = this._note.value.trim();
    try {
      const made = await this._client.create({
        scope: this._scope.value as ApiTokenScope,
        ...(note ? { note } : {}),
        ...(expiresIn > 0 ? { expiresIn } : {})
      });
      this._showCreated(made);
      this._note.value = '';
      await this.refresh();
    } catch (error) {
      this._showError(error);
    }
  }

  private _showCreated(made: ICreatedApiToken): void {
    const trans = this._trans;
    showSecret(this._created, {
      trans,
      text: trans.__(
        'Your new token is shown only now: copy it. It acts as you wherever it is used.'
      ),
      value: made.token,
      label: trans.__('Token'),
      inputClass: 'jp-FerryTokens-secret',
      copyClass: 'jp-FerryTokens-copy'
    });
  }

  private async _revoke(token: IApiToken): Promise<void> {
    try {
      await this._client.revoke(token.id);
    } catch (error) {
      this._showError(error);
    }
    await this.refresh();
  }

  private _showError(error: unknown): void {
    this._error.textContent = errorText(error);
  }

  private readonly _trans: TranslationBundle;
  private readonly _note: HTMLInputElement;
  private readonly _scope: HTMLSelectElement;
  private readonly _expiry: HTMLSelectElement;
  private readonly _created: HTMLDivElement;
  private readonly _error: HTMLDivElement;
  private readonly _list: RevocableList<IApiToken>;
  private _tokens: IApiToken[] = [];
}

/** Opens the API tokens panel in a dialog. */
export async function showTokensDialog(
  client: TokensClient,
  translator: ITranslator = nullTranslator
): Promise<void> {
  const trans = translator.load('ferry');
  await showDialog({
    title: trans.__('API Tokens'),
    body: new TokensPanel(client, translator),
    buttons: [Dialog.okButton({ label: trans.__('Done') })]
  });
}

/** The command IDs of the panel. */
namespace CommandIDs {
  export const tokens = 'ferry:api-tokens';
}

/** "API Tokens…": the command and its palette item. */
export const tokensPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:api-tokens',
  description:
    'Adds "API Tokens…" (palette, Settings menu): make, list and revoke your tokens for API clients.',
  autoStart: true,
  optional: [ICommandPalette, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load('ferry');
    const client = new TokensClient(app.serviceManager.serverSettings);
    app.commands.addCommand(CommandIDs.tokens, {
      label: trans.__('API Tokens…'),
      caption: trans.__(
        'Make tokens for API clients (ferry run, nbclient, jupyter server), see and revoke them'
      ),
      execute: () => showTokensDialog(client, translator ?? nullTranslator)
    });
    palette?.addItem({
      command: CommandIDs.tokens,
      category: trans.__('Settings')
    });
  }
};
