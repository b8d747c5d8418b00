/**
 * The admin page (`/api/admin`): every user with their kernels, terminals, jobs and devices, a
 * Stop beside each (asking why: the user is told), Sign out, Remove and Restore per user, who
 * holds devices now with "Return devices" and device use by user, group, model or day
 * (admin-devices.ts), users' and groups' pools' quotas with their overrides (admin-quotas.ts), and
 * the audit log of what admins did. Opened by "Users and Audit Log…" (palette, Settings menu), which
 * only admins see: the command asks the gateway once whether this user is one.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  InputDialog,
  MainAreaWidget
} from '@jupyterlab/apputils';
import {
  ITranslator,
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';
import {
  AdminClient,
  type IAdminUser,
  type IAuditEntry,
  type StoppableKind,
  type UserAction
} from './admin-client';
import { HoldersSection, UsageSection } from './admin-devices';
import { QuotasSection } from './admin-quotas';
import { errorText } from './api';
import { headerRow, itemList, tableRow } from './admin-table';

/**
 * Asks an admin why (the user is told): resolves with the reason, or null when they cancel.
 */
export type ReasonPrompt = (title: string) => Promise<string | null>;

/** The reason prompt of the lab: a text dialog that needs an answer. */
export function reasonDialog(trans: TranslationBundle): ReasonPrompt {
  return async title => {
    const answer = await InputDialog.getText({
      title,
      label: trans.__('Why? The user is told this reason.'),
      placeholder: trans.__('Reason'),
      okLabel: trans.__('Do it'),
      cancelLabel: trans.__('Cancel')
    });
    const reason = answer.value?.trim();
    return answer.button.accept && reason ? reason : null;
  };
}

/** The admin page: users (with Stop, Sign out, Remove or Restore) and the audit log. */
export class AdminPanel extends Widget {
  constructor(options: AdminPanel.IOptions) {
    super();
    this._client = options.client;
    const trans = (this._trans = (options.translator ?? nullTranslator).load(
      'ferry'
    ));
    this._ask = options.askReason ?? reasonDialog(trans);
    this._self = options.currentUser;
    this.addClass('jp-FerryAdmin');
    const bar = document.createElement('div');
    bar.className = 'jp-FerryAdmin-bar';
    const refresh = document.createElement('button');
    refresh.type = 'button';
    refresh.className = 'jp-mod-styled jp-FerryAdmin-refresh';
    refresh.textContent = trans.__('Refresh');
    refresh.addEventListener('click', () => void this.refresh());
    bar.append(refresh);
    this._error = document.createElement('div');
    this._error.className = 'jp-FerryAdmin-error';
    this._error.setAttribute('role', 'alert');
    const usersHeading = document.createElement('h2');
    usersHeading.textContent = trans.__('Users');
    this._users = document.createElement('table');
    this._users.className = 'jp-FerryAdmin-users';
    const auditHeading = document.createElement('h2');
    auditHeading.textContent = trans.__('Audit log');
    this._audit = document.createElement('table');
    this._audit.className = 'jp-FerryAdmin-audit';
    this._holders = new HoldersSection(this._client, trans, this._ask, () =>
      this.refresh()
    );
    this._usage = new UsageSection(this._client, trans);
    this._quotas = new QuotasSection(this._client, trans, () => this.refresh());
    this.node.append(
      bar,
      this._error,
      usersHeading,
      this._users,
      this._holders.node,
      this._usage.node,
      this._quotas.node,
      auditHeading,
      this._audit
    );
  }

  /** Reads users, device holders, device use, quotas and the audit log again and redraws them. */
  async refresh(): Promise<void> {
    // The device parts say their own errors (a gateway without the usage ledger).
    void this._usage.refresh();
    const users = this._client.users();
    // Holders are named by their notebook where the users' list knows it.
    void users.then(
      list =>
        this._holders.refresh(
          new Map(
            list.flatMap(user =>
              user.kernels.map(k => [k.id, k.path ?? k.name] as const)
            )
          )
        ),
      () => this._holders.refresh()
    );
    // Each user's quotas are asked of the gateway by the users' list.
    void users.then(
      list => this._quotas.refresh(list),
      () => this._quotas.refresh([])
    );
    try {
      const [list, audit] = await Promise.all([users, this._client.audit()]);
      this._showError(undefined);
      this._renderUsers(list);
      this._renderAudit(audit);
    } catch (error) {
      this._showError(error);
    }
  }

  /** Scroll the page to its quotas. */
  showQuotas(): void {
    this._quotas.node.scrollIntoView({ block: 'start' });
  }

  protected onAfterAttach(): void {
    void this.refresh();
  }

  private _renderUsers(users: IAdminUser[]): void {
    const trans = this._trans;
    this._users.replaceChildren(
      headerRow([
        trans.__('User'),
        trans.__('Last seen'),
        trans.__('Kernels'),
        trans.__('Terminals'),
        trans.__('Jobs'),
        trans.__('Devices'),
        ''
      ])
    );
    if (users.length === 0) {
      this._users.append(tableRow([trans.__('No users yet.')]));
      return;
    }
    for (const user of users) {
      const who = document.createElement('div');
      who.className = 'jp-FerryAdmin-user';
      const name = document.createElement('strong');
      name.textContent = user.name;
      const about = document.createElement('span');
      about.className = 'jp-FerryAdmin-about';
      about.textContent = [
        ...user.roles.map(role =>
          role === 'admin' ? trans.__('admin') : role
        ),
        ...user.groups,
        ...(user.removed
          ? [
              trans.__(
                'removed by %1: %2',
                user.removed.by,
                user.removed.reason
              )
            ]
          : [])
      ].join(' · ');
      who.append(name, about);
      const kernels = user.kernels.map(kernel =>
        this._stoppable(
          'kernels',
          kernel.id,
          `${kernel.path ?? kernel.name} (${kernel.execution_state})`,
          trans.__('Stop kernel %1 of %2', kernel.path ?? kernel.id, user.name)
        )
      );
      const terminals = user.terminals.map(terminal =>
        this._stoppable(
          'terminals',
          terminal.name,
          trans.__('terminal %1', terminal.name),
          trans.__('Close terminal %1 of %2', terminal.name, user.name)
        )
      );
      const jobs = user.jobs.map(job =>
        this._stoppable(
          'jobs',
          job.id,
          `${job.name} (${job.state})`,
          trans.__('Stop job %1 of %2', job.name, user.name)
        )
      );
      const actions = document.createElement('div');
      actions.className = 'jp-FerryAdmin-actions';
      if (user.id !== 'owner') {
        actions.append(
          this._userButton(
            'sign-out',
            user,
            trans.__('Sign out'),
            trans.__('Sign %1 out everywhere', user.name)
          ),
          // An admin does not remove themselves (the gateway refuses it too).
          user.name === this._self
            ? ''
            : user.removed
              ? this._userButton(
                  'restore',
                  user,
                  trans.__('Restore'),
                  trans.__('Let %1 sign in again', user.name)
                )
              : this._userButton(
                  'remove',
                  user,
                  trans.__('Remove'),
                  trans.__(
                    'Remove %1: their kernels stop, they are signed out; their files stay',
                    user.name
                  )
                )
        );
      }
      const item = tableRow([
        who,
        user.lastSeenAt
          ? new Date(user.lastSeenAt).toLocaleString()
          : trans.__('now'),
        itemList(kernels),
        itemList(terminals),
        itemList(jobs),
        user.devices.join(', '),
        actions
      ]);
      item.dataset.userId = user.id;
      this._users.append(item);
    }
  }

  private _renderAudit(entries: IAuditEntry[]): void {
    const trans = this._trans;
    this._audit.replaceChildren(
      headerRow([
        trans.__('When'),
        trans.__('Admin'),
        trans.__('Action'),
        trans.__('User'),
        trans.__('What'),
        trans.__('Reason')
      ])
    );
    if (entries.length === 0) {
      this._audit.append(tableRow([trans.__('No admin actions yet.')]));
      return;
    }
    const actions: Partial<Record<string, string>> = {
      'stop-kernel': trans.__('stopped a kernel'),
      'stop-terminal': trans.__('closed a terminal'),
      'stop-job': trans.__('stopped a job'),
      'sign-out': trans.__('signed out'),
      'remove-user': trans.__('removed'),
      'restore-user': trans.__('restored'),
      'return-devices': trans.__('returned devices'),
      'set-quota': trans.__('set a quota'),
      'remove-quota': trans.__('removed a quota override'),
      'set-pool-quota': trans.__("set a group's pool"),
      'remove-pool-quota': trans.__("removed a group's pool override")
    };
    for (const entry of entries) {
      const item = tableRow([
        new Date(entry.at).toLocaleString(),
        entry.actor.name,
        actions[entry.action] ?? entry.action,
        entry.user.name,
        entry.resource ?? '',
        entry.reason
      ]);
      item.dataset.action = entry.action;
      this._audit.append(item);
    }
  }

  /** A thing that runs, with its Stop button. */
  private _stoppable(
    kind: StoppableKind,
    id: string,
    label: string,
    question: string
  ): HTMLElement {
    const item = document.createElement('li');
    item.dataset.id = id;
    const text = document.createElement('span');
    text.textContent = label;
    const stop = document.createElement('button');
    stop.type = 'button';
    stop.className = 'jp-mod-styled jp-mod-warn jp-FerryAdmin-stop';
    stop.textContent = this._trans.__('Stop');
    stop.addEventListener('click', () =>
      this._do(question, reason => this._client.stop(kind, id, reason))
    );
    item.append(text, stop);
    return item;
  }

  private _userButton(
    action: UserAction,
    user: IAdminUser,
    label: string,
    question: string
  ): HTMLButtonElement {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = `jp-mod-styled jp-FerryAdmin-${action}${
      action === 'restore' ? '' : ' jp-mod-warn'
    }`;
    button.textContent = label;
    button.addEventListener('click', () =>
      this._do(question, reason => this._client.act(action, user.id, reason))
    );
    return button;
  }

  /** Ask why, do it, then show what is now. */
  private async _do(
    question: string,
    run: (reason: string) => Promise<unknown>
  ): Promise<void> {
    const reason = await this._ask(question);
    if (reason === null) {
      return;
    }
    try {
      await run(reason);
    } catch (error) {
      this._showError(error);
      return;
    }
    await this.refresh();
  }

  private _showError(error: unknown): void {
    this._error.textContent = errorText(error);
  }

  private readonly _client: AdminClient;
  private readonly _trans: TranslationBundle;
  private readonly _ask: ReasonPrompt;
  private readonly _self: string | undefined;
  private readonly _error: HTMLDivElement;
  private readonly _users: HTMLTableElement;
  private readonly _audit: HTMLTableElement;
  private readonly _holders: HoldersSection;
  private readonly _usage: UsageSection;
  private readonly _quotas: QuotasSection;
}

export namespace AdminPanel {
  export interface IOptions {
    client: AdminClient;
    translator?: ITranslator;
    /** How an admin is asked why (default: a dialog). */
    askReason?: ReasonPrompt;
    /** The name of the admin looking (not offered to remove themselves). */
    currentUser?: string;
  }
}

/** The command IDs of the admin page. */
namespace CommandIDs {
  export const admin = 'ferry:admin';
  export const quotas = 'ferry:admin-quotas';
}

/** "Users and Audit Log…" and "Quotas…" (the same page, at its quotas): for admins only. */
export const adminPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:admin',
  description:
    'Adds "Users and Audit Log…" for admins: every user with what they run, stop it with a reason, sign out, remove; devices held and used; quotas and their overrides; the audit log.',
  autoStart: true,
  optional: [ICommandPalette, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load('ferry');
    const client = new AdminClient(app.serviceManager.serverSettings);
    let admin = false;
    let page: MainAreaWidget<AdminPanel> | null = null;
    app.commands.addCommand(CommandIDs.admin, {
      label: trans.__('Users and Audit Log…'),
      caption: trans.__(
        'Every user with what they run; stop it with a reason, sign users out, remove them; devices; quotas and their overrides; what admins did'
      ),
      isVisible: () => admin,
      isEnabled: () => admin,
      execute: (args?: { section?: string }) => {
        if (!page || page.isDisposed) {
          const panel = new AdminPanel({
            client,
            translator: translator ?? nullTranslator,
            currentUser: app.serviceManager.user.identity?.username
          });
          page = new MainAreaWidget({ content: panel });
          page.id = 'ferry-admin';
          page.title.label = trans.__('Users');
          page.title.closable = true;
        }
        if (!page.isAttached) {
          app.shell.add(page, 'main');
        } else {
          void page.content.refresh();
        }
        app.shell.activateById(page.id);
        if (args?.section === 'quotas') {
          page.content.showQuotas();
        }
      }
    });
    app.commands.addCommand(CommandIDs.quotas, {
      label: trans.__('Quotas…'),
      caption: trans.__(
        "Users' and groups' pools' quotas, where each value comes from; set or clear an override"
      ),
      isVisible: () => admin,
      isEnabled: () => admin,
      execute: () =>
        app.commands.execute(CommandIDs.admin, { section: 'quotas' })
    });
    void client.isAdmin().then(is => {
      admin = is;
      if (is) {
        for (const command of [CommandIDs.admin, CommandIDs.quotas]) {
          palette?.addItem({ command, category: trans.__('Settings') });
        }
      }
      app.commands.notifyCommandChanged(CommandIDs.admin);
      app.commands.notifyCommandChanged(CommandIDs.quotas);
    });
  }
};
