/**
 * The page a share link opens: JupyterLab in single-document mode on the shared notebook, with the
 * link's rights (read-only cells below edit, no runs below run), a bar saying what the link grants
 * and which accelerator the kernel runs on, and the visitor's display name asked on first open.
 * On the owner's own page (no `ferryShare` in the page config) it does nothing.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ILabShell } from '@jupyterlab/application';
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { PageConfig } from '@jupyterlab/coreutils';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import {
  ITranslator,
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';
import { formatStatus } from '@ferry/accelerators';

import {
  ShareApiError,
  SharesClient,
  type ICurrentShare,
  type ShareScope
} from './api';
import { scopeDescriptions } from './dialog';
import { applyRights, guardCommands } from './rights';

/** The answer to "is this page a link's, and which?", asked once per page. */
let asked: Promise<ICurrentShare | undefined> | undefined;

/** What the link this page was opened with grants; undefined on the owner's page. */
export function currentShare(
  app: JupyterFrontEnd
): Promise<ICurrentShare | undefined> {
  // The gateway marks a link's page in its page config; the owner's page asks nothing.
  if (!PageConfig.getOption('ferryShare')) {
    return Promise.resolve(undefined);
  }
  asked ??= new SharesClient(app.serviceManager.serverSettings)
    .current()
    .catch(error => {
      if (error instanceof ShareApiError && error.status === 403) {
        // The link ended (revoked, expired, its notebook gone) after the page was served: every
        // request of the page is refused and JupyterLab cannot start, so say why over the page
        // rather than leave it blank.
        showLinkEnded(error.message);
      } else {
        console.warn('Could not ask the server about a share link', error);
      }
      return undefined;
    });
  return asked;
}

/** What each scope lets a visitor do, in the fewest words (the banner's). */
export function scopeNames(
  trans: TranslationBundle
): Record<ShareScope, string> {
  return {
    view: trans.__('View only'),
    comment: trans.__('Can comment'),
    run: trans.__('Can run cells'),
    edit: trans.__('Can edit')
  };
}

/** The most characters of a display name (the server says the same). */
const NAME_MAX = 64;

/** The bar above the notebook: who shared what, with which rights, on which devices. */
export class ShareBanner extends Widget {
  constructor(
    share: ICurrentShare,
    translator: ITranslator = nullTranslator,
    client?: SharesClient
  ) {
    super();
    const trans = translator.load('ferry');
    this.id = 'jp-ferry-share-banner';
    this.addClass('jp-FerryShareBanner');
    this.node.dataset.scope = share.scope;
    const scope = document.createElement('span');
    scope.className = 'jp-FerryShareBanner-scope';
    scope.setAttribute('role', 'status');
    scope.textContent = share.sharedBy
      ? trans.__(
          '%1 · shared by %2',
          scopeNames(trans)[share.scope],
          share.sharedBy
        )
      : scopeNames(trans)[share.scope];
    scope.title = scopeDescriptions(trans)[share.scope];
    const parts: HTMLElement[] = [scope];
    if (share.kernel) {
      const device = document.createElement('span');
      device.className = 'jp-FerryShareBanner-accelerator';
      device.textContent = trans.__(
        'kernel on %1',
        formatStatus(share.kernel.accelerator)
      );
      parts.push(device);
    }
    if (share.expiresAt) {
      const expiry = document.createElement('span');
      expiry.className = 'jp-FerryShareBanner-expiry';
      expiry.textContent = trans.__(
        'link expires %1',
        new Date(share.expiresAt).toLocaleString()
      );
      parts.push(expiry);
    }
    if (client && share.visitor?.account) {
      // A signed-in visitor may run a copy of their own, as Colab's recipients do.
      const own = document.createElement('button');
      own.type = 'button';
      own.className = 'jp-mod-styled jp-FerryShareBanner-ownRuntime';
      own.textContent = trans.__('Run in my own runtime');
      own.title = trans.__(
        "Copies the notebook into your own folder and opens it there: its code runs on a kernel of your own, with your files, not in the owner's kernel."
      );
      own.addEventListener('click', () => {
        own.disabled = true;
        void client
          .copyToMine(share.id)
          .then(copy => window.location.assign(copy.next))
          .catch(error => {
            own.disabled = false;
            own.textContent = String(
              error instanceof Error ? error.message : error
            );
          });
      });
      const leave = document.createElement('button');
      leave.type = 'button';
      leave.className = 'jp-mod-styled jp-FerryShareBanner-leave';
      leave.textContent = trans.__('Back to my files');
      leave.addEventListener('click', () => {
        leave.disabled = true;
        void client
          .leave()
          .then(() => window.location.assign('/lab'))
          .catch(() => (leave.disabled = false));
      });
      parts.push(own, leave);
    }
    this.node.append(...parts);
  }
}

/**
 * Covers the page with the news that its link ended (revoked or expired): nothing under it works any
 * more (its sockets are closed, the gateway refuses the rest), so nothing under it is offered.
 */
export function showLinkEnded(
  reason: string,
  trans: TranslationBundle = nullTranslator.load('ferry')
): void {
  if (document.querySelector('.jp-FerryShareEnded')) {
    return;
  }
  const cover = document.createElement('div');
  cover.className = 'jp-FerryShareEnded';
  cover.setAttribute('role', 'alertdialog');
  cover.setAttribute('aria-label', trans.__('This link no longer works'));
  const box = document.createElement('div');
  const title = document.createElement('h2');
  title.textContent = /revoked/i.test(reason)
    ? trans.__('This link was revoked')
    : /expired/i.test(reason)
      ? trans.__('This link expired')
      : trans.__('This link no longer works');
  const text = document.createElement('p');
  text.textContent = reason || trans.__('Its owner revoked it, or it expired.');
  box.append(title, text);
  cover.append(box);
  document.body.append(cover);
}

/**
 * When a notebook's kernel connection drops, asks the server whether the link still works; if it
 * ended, says why over the page and stops the kernel connections, whose reconnects would only be
 * refused and end in JupyterLab's "Kernel died unexpectedly".
 */
export function endWithLink(
  client: SharesClient,
  tracker: INotebookTracker,
  trans: TranslationBundle = nullTranslator.load('ferry')
): void {
  let asking = false;
  const check = async (): Promise<void> => {
    if (asking || document.querySelector('.jp-FerryShareEnded')) {
      return;
    }
    asking = true;
    try {
      await client.current();
    } catch (error) {
      if (error instanceof ShareApiError && error.status === 403) {
        showLinkEnded(error.message, trans);
        tracker.forEach(panel =>
          panel.sessionContext.session?.kernel?.dispose()
        );
      }
    } finally {
      asking = false;
    }
  };
  const watch = (panel: NotebookPanel): void => {
    panel.sessionContext.connectionStatusChanged.connect((_, status) => {
      if (status !== 'connected') {
        void check();
      }
    });
  };
  tracker.widgetAdded.connect((_, panel) => watch(panel));
  tracker.forEach(watch);
}

/** Asks a display name until the server takes one (or the visitor dismisses the dialog). */
export async function askName(
  client: SharesClient,
  initial = '',
  trans: TranslationBundle = nullTranslator.load('ferry')
): Promise<string | undefined> {
  let problem = '';
  for (;;) {
    const body = new Widget();
    body.addClass('jp-FerryShare-name');
    const label = document.createElement('label');
    label.textContent = trans.__('Your name, as the others will see it');
    const input = document.createElement('input');
    input.className = 'jp-mod-styled';
    input.maxLength = NAME_MAX;
    input.value = initial;
    input.setAttribute('aria-label', trans.__('Your name'));
    label.append(input);
    const error = document.createElement('div');
    error.className = 'jp-FerryShare-error';
    error.setAttribute('role', 'alert');
    error.textContent = problem;
    body.node.append(label, error);
    const result = await showDialog({
      title: trans.__('Welcome'),
      body,
      focusNodeSelector: 'input',
      buttons: [Dialog.okButton({ label: trans.__('Join') })],
      hasClose: false
    });
    const name = input.value.trim();
    if (!result.button.accept) {
      return undefined;
    }
    try {
      await client.setName(name);
      return name;
    } catch (reason) {
      problem = reason instanceof Error ? reason.message : String(reason);
      initial = name;
    }
  }
}

/**
 * On a link's page, asks what the link grants as the page starts, needing nothing else: when the
 * link ended after the page was served, every request of the page is refused, JupyterLab's own
 * plugins cannot start, and nothing else would tell the visitor why the page stays blank.
 */
export const linkEndedPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:link-ended',
  description:
    "On a share link's page: says over the page when the link ended before the page could start.",
  autoStart: true,
  activate: (app: JupyterFrontEnd): void => {
    void currentShare(app);
  }
};

/** The visitor side of a share link. */
export const visitorPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:visitor',
  description:
    "On a share link's page: single-document mode on the shared notebook, the link's rights, its scope and accelerator shown, the visitor's name asked once.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell, ITranslator],
  activate: async (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    labShell: ILabShell | null,
    translator: ITranslator | null
  ): Promise<void> => {
    translator = translator ?? nullTranslator;
    const trans = translator.load('ferry');
    const client = new SharesClient(app.serviceManager.serverSettings);
    const share = await currentShare(app);
    if (!share) {
      return;
    }
    const current = share;
    document.body.dataset.ferryShareScope = current.scope;
    guardCommands(app.commands, current.scope, tracker, trans);
    tracker.widgetAdded.connect((_, panel) =>
      applyRights(panel, current.scope)
    );
    tracker.forEach(panel => applyRights(panel, current.scope));
    endWithLink(client, tracker, trans);
    app.shell.add(new ShareBanner(current, translator, client), 'top', {
      rank: 1000
    });
    void app.restored.then(async () => {
      // The page config opens the notebook alone (single-document mode); no sidebars either.
      if (labShell) {
        labShell.collapseLeft();
        labShell.collapseRight();
      }
      // The link page asks the name before it opens the lab; a visitor who came straight here has none.
      if (current.visitor && !current.visitor.name) {
        if ((await askName(client, '', trans)) !== undefined) {
          await app.serviceManager.user.refreshUser();
        }
      }
    });
  }
};
