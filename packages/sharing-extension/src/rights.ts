/**
 * What a link's visitor may do, applied to the page: the gateway decides (it drops a view link's
 * edits and refuses its runs); this keeps the page from offering what would be refused. Cells are
 * read-only below the edit scope, and the commands that would change the notebook (or run it,
 * below the run scope, or touch the kernel) are refused with a notice instead of diverging.
 */
import { Notification } from '@jupyterlab/apputils';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import {
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import { mayEdit, mayRun, type ShareScope } from './api';
import { viewerTrusts } from './trust';

/** Commands that run cells: refused below the run scope. */
const RUN_COMMANDS = /^notebook:(run-|restart-run-all)/;

/** Commands that change the notebook's cells or file: refused below the edit scope. */
const EDIT_COMMANDS = new RegExp(
  '^(' +
    [
      'notebook:(insert|delete|cut|paste|copy-to-clipboard-paste|move|split|merge|change-cell-to|undo|redo|clear|replace|set-side-by-side|toggle-render-side-by-side)',
      'notebook:run-cell-and-insert',
      'notebook:run-in-console',
      'docmanager:(save|rename|delete|move|reload|duplicate|toggle-autosave)',
      'filebrowser:(delete|rename|paste|cut|create|new)',
      'completer:invoke'
    ].join('|') +
    ')'
);

/** Commands that change the kernel (the owner's): refused to every visitor. */
const KERNEL_COMMANDS =
  /^(notebook:(restart|interrupt|shutdown|change-kernel|reconnect)|kernelmenu:|running:kernel)/;

/**
 * Trusting outputs: only for a visitor whose room keeps what they trust (a signed-in person the
 * notebook is granted to); never a link's guest, whose trust the gateway never keeps.
 */
const TRUST_COMMAND = /^notebook:trust/;

/** JupyterLab's Shift+Enter. */
const RUN_AND_ADVANCE = 'notebook:run-cell-and-select-next';

/** Whether the current notebook's active cell is its last. */
function lastCellActive(tracker: INotebookTracker): boolean {
  const notebook = tracker.currentWidget?.content;
  return !!notebook && notebook.activeCellIndex === notebook.widgets.length - 1;
}

/**
 * Whether a visitor with `scope` may execute the command `id`.
 *
 * @param trusts - whether the room of the notebook in front keeps what this visitor trusts.
 */
export function commandAllowed(
  scope: ShareScope,
  id: string,
  trusts = false
): boolean {
  if (TRUST_COMMAND.test(id)) {
    return trusts;
  }
  if (KERNEL_COMMANDS.test(id)) {
    return false;
  }
  if (!mayEdit(scope) && EDIT_COMMANDS.test(id)) {
    return false;
  }
  if (!mayRun(scope) && RUN_COMMANDS.test(id)) {
    return false;
  }
  return true;
}

/**
 * Wraps the command registry's `execute` so that a refused command does nothing but say why. The
 * keyboard shortcuts, menus and toolbar buttons all go through it.
 */
export function guardCommands(
  commands: CommandRegistry,
  scope: ShareScope,
  tracker: INotebookTracker,
  trans: TranslationBundle = nullTranslator.load('ferry')
): void {
  const execute = commands.execute.bind(commands);
  commands.execute = (id, args) => {
    // Running the last cell adds a cell below it: below edit, run it and stay.
    if (id === RUN_AND_ADVANCE && !mayEdit(scope) && lastCellActive(tracker)) {
      return execute('notebook:run-cell', args);
    }
    if (!commandAllowed(scope, id, viewerTrusts(tracker.currentWidget))) {
      Notification.warning(
        trans.__(
          'This link lets you %1 the notebook: "%2" is not part of it.',
          scope,
          commands.label(id, args) || id
        ),
        { autoClose: 4000 }
      );
      return Promise.resolve(undefined);
    }
    return execute(id, args);
  };
}

/** Makes a notebook's cells read-only below the edit scope, also cells that arrive later. */
export function applyRights(panel: NotebookPanel, scope: ShareScope): void {
  panel.node.dataset.ferryScope = scope;
  panel.addClass('jp-mod-ferryVisitor');
  if (mayEdit(scope)) {
    return;
  }
  const notebook = panel.content;
  const lock = () => {
    if (notebook.model) {
      notebook.model.readOnly = true;
    }
    for (const cell of notebook.widgets) {
      // Only this page's view: the cell's `editable` metadata is the notebook's, not the visitor's.
      cell.syncEditable = false;
      cell.readOnly = true;
    }
  };
  lock();
  notebook.modelContentChanged.connect(lock);
  notebook.modelChanged.connect(lock);
}
