/**
 * The cell executor: a code cell of a notebook open in a room is run by the gateway
 * (`POST /api/kernels/{id}/execute` with the cell's id and the room's id), which writes the
 * outputs into the room, so every collaborator sees `[*]` and the streams, and the outputs keep
 * landing when this page closes. A notebook that is not in a room runs as JupyterLab runs it.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { INotebookCellExecutor, runCell } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';
import type { RestSchemas } from '@ferry/rest-contract';

/** What the gateway answers when a run ends (schema `CellExecuteReply`), or why it refused it (`Error`). */
type IExecuteReply = Partial<
  RestSchemas['CellExecuteReply'] & RestSchemas['Error']
>;

/** The room a notebook's shared model is synchronised with, once it has synced. */
export function roomOf(
  notebook: INotebookCellExecutor.IRunCellOptions['notebook']
): string | undefined {
  const id = notebook.sharedModel.getState('document_id');
  return typeof id === 'string' && id.length > 0 ? id : undefined;
}

/** Runs cells on the gateway for notebooks in a room, in the page for the others. */
export class ServerCellExecutor implements INotebookCellExecutor {
  constructor(private readonly _serverSettings: ServerConnection.ISettings) {}

  async runCell(
    options: INotebookCellExecutor.IRunCellOptions
  ): Promise<boolean> {
    const { cell, notebook, sessionContext } = options;
    const documentId = roomOf(notebook);
    if (cell.model.type !== 'code' || !documentId || !sessionContext) {
      return runCell(options);
    }
    const trans = (options.translator ?? nullTranslator).load('jupyterlab');
    if (sessionContext.isTerminating) {
      await showDialog({
        title: trans.__('Kernel Terminating'),
        body: trans.__('The kernel is shutting down: the cell was not run.'),
        buttons: [Dialog.okButton()]
      });
      return false;
    }
    if (sessionContext.hasNoKernel) {
      const shouldSelect = await sessionContext.startKernel();
      if (shouldSelect && options.sessionDialogs) {
        await options.sessionDialogs.selectKernel(sessionContext);
      }
    }
    const kernelId = sessionContext.session?.kernel?.id;
    if (!kernelId) {
      return true;
    }
    options.onCellExecutionScheduled({ cell });
    const url = URLExt.join(
      this._serverSettings.baseUrl,
      'api/kernels',
      encodeURIComponent(kernelId),
      'execute'
    );
    let reply: IExecuteReply = {};
    let ok = false;
    try {
      const response = await ServerConnection.makeRequest(
        url,
        {
          method: 'POST',
          body: JSON.stringify({
            cell_id: cell.model.sharedModel.getId(),
            document_id: documentId
          })
        },
        this._serverSettings
      );
      const text = await response.text();
      try {
        reply = text ? (JSON.parse(text) as IExecuteReply) : {};
      } catch {
        reply = {};
      }
      ok = response.ok;
      if (!ok) {
        const message =
          reply.message ?? `${response.status} ${response.statusText}`;
        void showDialog({
          title: trans.__('The cell was not run'),
          body: message,
          buttons: [Dialog.okButton()]
        });
      }
    } catch (error) {
      options.onCellExecuted({ cell, success: false });
      if (cell.isDisposed) {
        return false;
      }
      throw error;
    }
    const success = ok && (reply.status ?? 'ok') === 'ok';
    options.onCellExecuted({ cell, success });
    return success;
  }
}

/**
 * Replaces JupyterLab's executor (`@jupyterlab/notebook-extension:cell-executor`, left out of the
 * hosted lab's build).
 */
export const cellExecutorPlugin: JupyterFrontEndPlugin<INotebookCellExecutor> =
  {
    id: '@ferry/sharing-extension:cell-executor',
    description:
      'Runs the code cells of a notebook open in a room on the gateway, which writes the outputs into the room.',
    autoStart: true,
    provides: INotebookCellExecutor,
    activate: (app: JupyterFrontEnd): INotebookCellExecutor =>
      new ServerCellExecutor(app.serviceManager.serverSettings)
  };
