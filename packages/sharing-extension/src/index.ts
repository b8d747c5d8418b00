/**
 * @packageDocumentation
 * @module sharing-extension
 * JupyterLab plugins for Ferry's share links and co-editing: the collaboration client (documents
 * open in rooms of the gateway), the server-side cell executor, the Share button and command
 * (create a link, see its visitors, revoke it), the page a link opens (its rights, the visitor's
 * name), the API tokens panel (a user's tokens for API clients), the admin page (users, what
 * they run, the audit log), and the notices of what an admin stopped of the user's, and why.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  IToolbarWidgetRegistry,
  ToolbarButton
} from '@jupyterlab/apputils';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';
import { adminPlugin } from './admin';
import { SharesClient } from './api';
import { commentsPlugin } from './comments';
import { collaborationPlugins } from './collaboration';
import { showShareDialog } from './dialog';
import { cellExecutorPlugin } from './executor';
import { noticesPlugin } from './notices';
import { presencePlugin } from './presence';
import { tokensPlugin } from './tokens';
import { linkEndedPlugin, visitorPlugin } from './visitor';

export { AdminPanel, type ReasonPrompt } from './admin';
export { AdminClient, type IAdminUser, type IAuditEntry } from './admin-client';
export * from './api';
export { SharePanel } from './dialog';
export { ServerCellExecutor } from './executor';
export {
  NoticeBoard,
  NoticesClient,
  noticeText,
  type IUserNotice
} from './notices';
export {
  showTokensDialog,
  TokensClient,
  TokensPanel,
  type ApiTokenScope,
  type IApiToken,
  type ICreatedApiToken
} from './tokens';
export { commandAllowed } from './rights';
export {
  addComment,
  COMMENTS_ROOT,
  deleteComment,
  setResolved,
  type IComment
} from './comments';

/** The command IDs of the extension. */
namespace CommandIDs {
  export const share = 'ferry:share-notebook';
}

/** The share icon (three linked nodes). */
const shareIcon = new LabIcon({
  name: 'ferry:share',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161"><path d="M18 16.08c-.76 0-1.44.3-1.96.77L8.91 12.7c.05-.23.09-.46.09-.7s-.04-.47-.09-.7l7.05-4.11A2.99 2.99 0 1 0 15 5c0 .24.04.47.09.7L8.04 9.81a3 3 0 1 0 0 4.38l7.12 4.16c-.05.21-.08.43-.08.65A2.92 2.92 0 1 0 18 16.08z"/></g></svg>'
});

/** "Share notebook…": the command, the File menu item and the notebook toolbar button. */
const sharePlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:share',
  description:
    'Adds "Share notebook…" (toolbar, File menu, palette): links with a scope, an expiry and a label; who is connected through each; revoke.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, IToolbarWidgetRegistry, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    toolbarRegistry: IToolbarWidgetRegistry | null,
    translator: ITranslator | null
  ): void => {
    const language = translator ?? nullTranslator;
    const trans = language.load('ferry');
    const client = new SharesClient(app.serviceManager.serverSettings);
    app.commands.addCommand(CommandIDs.share, {
      label: trans.__('Share Notebook…'),
      caption: trans.__(
        'Create a link to this notebook: view, comment, run or edit; see who uses it; revoke it'
      ),
      icon: shareIcon,
      isEnabled: () => !!tracker.currentWidget,
      execute: async () => {
        const panel = tracker.currentWidget;
        if (panel) {
          await showShareDialog(client, panel.context.path, language);
        }
      }
    });
    palette?.addItem({
      command: CommandIDs.share,
      category: trans.__('Notebook')
    });
    toolbarRegistry?.addFactory<NotebookPanel>('Notebook', 'share', panel => {
      const button = new ToolbarButton({
        icon: shareIcon,
        label: trans.__('Share'),
        tooltip: trans.__('Share this notebook with a link'),
        onClick: () =>
          void showShareDialog(client, panel.context.path, language)
      });
      button.addClass('jp-FerryShare-toolbarButton');
      return button;
    });
  }
};

const plugins: JupyterFrontEndPlugin<unknown>[] = [
  ...collaborationPlugins,
  cellExecutorPlugin,
  sharePlugin,
  linkEndedPlugin,
  visitorPlugin,
  presencePlugin,
  commentsPlugin,
  tokensPlugin,
  adminPlugin,
  noticesPlugin
];

export default plugins;
