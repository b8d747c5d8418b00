/**
 * What the user is told when an admin stopped their kernel, terminal or job (`/api/me/notices`,
 * schema/openapi.yaml): each notice as a JupyterLab notification, and, for a kernel, a banner in
 * the notebook that ran on it, until the user dismisses it. Notices are kept by the gateway, so a
 * user who was away (or removed, then restored) is told when they come back.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { PageConfig } from '@jupyterlab/coreutils';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import {
  ITranslator,
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';
import type { RestSchemas } from '@ferry/rest-contract';
import { requestJson } from './api';

/** One notice: schema `UserNotice`. */
export type IUserNotice = RestSchemas['UserNotice'];

/** Talks to `/api/me/notices` with the page's server settings. */
export class NoticesClient {
  constructor(
    readonly serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  /** The user's notices, newest first. */
  list(): Promise<IUserNotice[]> {
    return requestJson(this.serverSettings, 'api/me/notices', {
      method: 'GET'
    });
  }

  /** Dismiss one. */
  async dismiss(id: string): Promise<void> {
    await requestJson(
      this.serverSettings,
      `api/me/notices/${encodeURIComponent(id)}`,
      { method: 'DELETE' }
    );
  }
}

/** The words of a notice: what was stopped, and the admin's reason. */
export function noticeText(
  notice: IUserNotice,
  trans: TranslationBundle
): string {
  const stopped = trans.__('Stopped by an administrator: %1', notice.reason);
  switch (notice.kind) {
    case 'kernel':
      return notice.name
        ? trans.__('%1 (the kernel of %2)', stopped, notice.name)
        : trans.__('%1 (a kernel)', stopped);
    case 'terminal':
      return trans.__('%1 (terminal %2)', stopped, notice.resource);
    default:
      return trans.__('%1 (job %2)', stopped, notice.name ?? notice.resource);
  }
}

/**
 * Shows the user's notices: a notification each, and a banner on each notebook whose kernel was
 * the one stopped. Asked at start, whenever the running kernels or terminals change, and every
 * {@link NoticeBoard.INTERVAL_MS} (jobs).
 */
export class NoticeBoard {
  constructor(options: NoticeBoard.IOptions) {
    this._client = options.client;
    this._trans = options.trans;
  }

  /** Follow `panel`'s kernels, so that a notice about one finds the notebook. */
  track(panel: NotebookPanel): void {
    const kernels = new Set<string>();
    this._panels.set(panel, kernels);
    const note = () => {
      const id = panel.sessionContext.session?.kernel?.id;
      if (id) {
        kernels.add(id);
      }
    };
    note();
    panel.sessionContext.kernelChanged.connect(note);
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'dead') {
        void this.refresh();
      }
    });
    panel.disposed.connect(() => this._panels.delete(panel));
    // A notice already known may be about this notebook's last kernel.
    this._notices.forEach(notice => this._banner(notice));
  }

  /** Ask the gateway for the notices and show the new ones. */
  async refresh(): Promise<void> {
    let notices: IUserNotice[];
    try {
      notices = await this._client.list();
    } catch {
      // A share link's holder has none (refused), a gateway away: nothing to show now.
      return;
    }
    for (const notice of [...notices].reverse()) {
      if (this._notices.has(notice.id)) {
        continue;
      }
      this._notices.set(notice.id, notice);
      this._toasts.set(
        notice.id,
        Notification.warning(noticeText(notice, this._trans), {
          autoClose: false,
          actions: [
            {
              label: this._trans.__('Dismiss'),
              caption: this._trans.__('Do not tell me again'),
              callback: () => void this.dismiss(notice.id)
            }
          ]
        })
      );
      this._banner(notice);
    }
  }

  /** Dismiss a notice: at the gateway, its notification and its banners. */
  async dismiss(id: string): Promise<void> {
    const toast = this._toasts.get(id);
    if (toast !== undefined) {
      Notification.dismiss(toast);
    }
    this._banners.get(id)?.forEach(banner => banner.dispose());
    this._banners.delete(id);
    try {
      await this._client.dismiss(id);
    } catch {
      // Dismissed here already; gone there, or asked again next time.
    }
  }

  /**
   * A banner on each notebook that ran on the stopped kernel, or is the notebook the kernel was
   * for (opened again after the lab was away), once per notebook.
   */
  private _banner(notice: IUserNotice): void {
    if (notice.kind !== 'kernel') {
      return;
    }
    const shown = this._banners.get(notice.id) ?? [];
    this._panels.forEach((kernels, panel) => {
      const ran =
        kernels.has(notice.resource) ||
        (notice.name !== null && panel.context.path === notice.name);
      if (!ran || shown.some(banner => banner.panel === panel)) {
        return;
      }
      const banner = new NoticeBanner(panel, notice, this._trans, () =>
        this.dismiss(notice.id)
      );
      panel.contentHeader.addWidget(banner);
      shown.push(banner);
    });
    this._banners.set(notice.id, shown);
  }

  private readonly _client: NoticesClient;
  private readonly _trans: TranslationBundle;
  private readonly _panels = new Map<NotebookPanel, Set<string>>();
  private readonly _notices = new Map<string, IUserNotice>();
  private readonly _toasts = new Map<string, string>();
  private readonly _banners = new Map<string, NoticeBanner[]>();
}

export namespace NoticeBoard {
  export interface IOptions {
    client: NoticesClient;
    trans: TranslationBundle;
  }

  /** How often notices are asked for besides kernels and terminals changing. */
  export const INTERVAL_MS = 30_000;
}

/** The line above a notebook whose kernel an admin stopped, with the reason. */
class NoticeBanner extends Widget {
  constructor(
    readonly panel: NotebookPanel,
    notice: IUserNotice,
    trans: TranslationBundle,
    dismiss: () => void
  ) {
    super();
    this.addClass('jp-FerryNotice');
    this.node.setAttribute('role', 'alert');
    this.node.dataset.notice = notice.id;
    const text = document.createElement('span');
    text.className = 'jp-FerryNotice-text';
    text.textContent = trans.__(
      'Stopped by an administrator: %1',
      notice.reason
    );
    text.title = `${text.textContent}\n${trans.__(
      'The kernel %1 was stopped by %2 at %3. Start a new kernel to run this notebook again.',
      notice.resource,
      notice.by,
      new Date(notice.at).toLocaleString()
    )}`;
    const button = document.createElement('button');
    button.className = 'jp-Button jp-mod-styled jp-mod-reject';
    button.textContent = trans.__('Dismiss');
    button.addEventListener('click', dismiss);
    this.node.append(text, button);
  }
}

/** Tells the user what admins stopped of theirs, and why. */
export const noticesPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:notices',
  description:
    'Shows what an administrator stopped of yours (kernel, terminal, job) and why: a notification each, and a banner on the notebook.',
  autoStart: true,
  optional: [INotebookTracker, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker | null,
    translator: ITranslator | null
  ): void => {
    // A link's page (the gateway also leaves this plugin out there): its holder has no notices.
    if (PageConfig.getOption('ferryShare')) {
      return;
    }
    const board = new NoticeBoard({
      client: new NoticesClient(app.serviceManager.serverSettings),
      trans: (translator ?? nullTranslator).load('ferry')
    });
    tracker?.widgetAdded.connect((_, panel) => board.track(panel));
    tracker?.forEach(panel => board.track(panel));
    const refresh = () => void board.refresh();
    app.serviceManager.kernels.runningChanged.connect(refresh);
    app.serviceManager.terminals.runningChanged.connect(refresh);
    void app.restored.then(refresh);
    window.setInterval(refresh, NoticeBoard.INTERVAL_MS);
  }
};
