/**
 * @packageDocumentation
 * @module jobs-extension
 * Ferry's jobs in JupyterLab: "Run as Job…" on a notebook (toolbar and command palette) with the
 * accelerator picker and a parameters form read from its `parameters` cell, and the Jobs panel.
 */
import {
  chooseAccelerator,
  IAcceleratorManager,
  readNotebookAccelerator
} from '@ferry/accelerators';
import {
  ILabShell,
  ILayoutRestorer,
  type JupyterFrontEnd,
  type JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  IToolbarWidgetRegistry,
  Notification,
  showDialog,
  ToolbarButton
} from '@jupyterlab/apputils';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';
import { JobsClient, type IJob, type IJobSubmitRequest } from './client';
import { JobLog } from './log';
import { JobsPanel, submittedNotice } from './panel';
import {
  ParametersForm,
  pythonLiteral,
  readParameters,
  type IParameter
} from './parameters';

export { JobsClient, type IJob, type IJobSubmitRequest } from './client';
export { JobLog, outputText, parseEvents } from './log';
export { JobsPanel, submittedNotice } from './panel';
export { ParametersForm, parseValue, readParameters } from './parameters';

namespace CommandIDs {
  export const runAsJob = 'ferry:run-as-job';
  export const showJobs = 'ferry:show-jobs';
}

/** The icon of jobs: a play triangle in a box. */
const jobIcon = new LabIcon({
  name: 'ferry:job',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161"><path d="M4 4h16v16H4zm2 2v12h12V6zm3 2.5 7 3.5-7 3.5z"/></g></svg>'
});

const plugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/jobs-extension:plugin',
  description:
    'Adds "Run as Job…" (notebook toolbar and command palette): the notebook runs headless on the accelerator picked, with the parameters typed in; and the Jobs panel.',
  autoStart: true,
  requires: [IAcceleratorManager, INotebookTracker],
  optional: [
    ICommandPalette,
    IToolbarWidgetRegistry,
    ILabShell,
    ILayoutRestorer,
    ITranslator
  ],
  activate: (
    app: JupyterFrontEnd,
    manager: IAcceleratorManager,
    notebooks: INotebookTracker,
    palette: ICommandPalette | null,
    toolbar: IToolbarWidgetRegistry | null,
    labShell: ILabShell | null,
    restorer: ILayoutRestorer | null,
    translator: ITranslator | null
  ) => {
    translator = translator ?? nullTranslator;
    const trans = translator.load('ferry');
    const client = new JobsClient(app.serviceManager.serverSettings);
    const showLog = (job: IJob) => {
      const id = `jp-ferry-job-log-${job.id}`;
      const open = Array.from(app.shell.widgets('main')).find(
        widget => widget.id === id
      );
      if (open) {
        app.shell.activateById(id);
        return;
      }
      // The executed notebook beside the log.
      const beside = (path: string) =>
        app.commands
          .execute('docmanager:open', {
            path,
            options: { mode: 'split-right', ref: id }
          })
          .catch(error =>
            console.warn('The executed notebook could not be opened', error)
          );
      const log = new JobLog({
        client,
        job,
        trans,
        // Once it ended its executed notebook is whole (a finished job's stream ends at once).
        ended: final => {
          if (final.output_path) {
            void beside(final.output_path);
          }
        }
      });
      app.shell.add(log, 'main');
      app.shell.activateById(id);
    };
    const panel = new JobsPanel({
      client,
      open: path => void app.commands.execute('docmanager:open', { path }),
      showLog,
      rerun: job =>
        void Private.runAgain(app, job, client, translator!).then(() =>
          panel.refresh()
        ),
      translator
    });
    panel.title.icon = jobIcon;
    app.shell.add(panel, 'right', { rank: 600 });
    restorer?.add(panel, panel.id);
    const showJobs = () => {
      labShell?.activateById(panel.id);
      void panel.refresh();
    };
    app.commands.addCommand(CommandIDs.showJobs, {
      label: trans.__('Show Jobs'),
      caption: trans.__('The notebooks running headless, and those that ran'),
      execute: showJobs
    });
    app.commands.addCommand(CommandIDs.runAsJob, {
      label: trans.__('Run as Job…'),
      caption: trans.__(
        'Run this notebook headless on an accelerator, with parameters; the executed notebook is written beside it'
      ),
      icon: jobIcon,
      isEnabled: () => !!notebooks.currentWidget,
      execute: async () => {
        const notebook = notebooks.currentWidget;
        if (notebook) {
          const job = await Private.runAsJob(
            notebook,
            manager,
            client,
            () => Private.saveForJob(app, notebook),
            translator
          );
          if (job) {
            showJobs();
          }
        }
      }
    });
    palette?.addItem({
      command: CommandIDs.runAsJob,
      category: trans.__('Notebook')
    });
    palette?.addItem({
      command: CommandIDs.showJobs,
      category: trans.__('Notebook')
    });
    toolbar?.addFactory('Notebook', 'run-as-job', () => {
      const button = new ToolbarButton({
        icon: jobIcon,
        tooltip: trans.__(
          'Run this notebook headless on an accelerator (a job)'
        ),
        onClick: () => void app.commands.execute(CommandIDs.runAsJob)
      });
      button.addClass('jp-FerryJobs-toolbarButton');
      return button;
    });
  }
};

export default [plugin];

namespace Private {
  /**
   * Save the notebook so that the job runs what is on screen. A notebook open in its room is saved
   * by the room (the gateway writes the shared doc now), not through the page's conflict check: the
   * room's own save of a moment ago (a picker choice wrote the notebook's metadata) would otherwise
   * pass for someone else's change, and JupyterLab would ask "File Changed" in the middle of a run.
   */
  export async function saveForJob(
    app: JupyterFrontEnd,
    notebook: NotebookPanel
  ): Promise<void> {
    const providerId =
      app.docRegistry.getWidgetFactory('Notebook')?.contentProviderId;
    if (!notebook.context.model.collaborative || !providerId) {
      await notebook.context.save();
      return;
    }
    await app.serviceManager.contents.save(notebook.context.path, {
      type: 'notebook',
      format: 'json',
      contentProviderId: providerId
    });
  }

  /**
   * Run a job's notebook again on the same accelerator, with its parameters form starting on the
   * values that run had; resolves with the new job, or undefined when the user cancels.
   */
  export async function runAgain(
    app: JupyterFrontEnd,
    job: IJob,
    client: JobsClient,
    translator: ITranslator
  ): Promise<unknown> {
    const trans = translator.load('ferry');
    const before = (job.parameters ?? {}) as Record<string, unknown>;
    let parameters: IParameter[] = [];
    if (job.path) {
      try {
        const model = await app.serviceManager.contents.get(job.path, {
          content: true
        });
        const cells = (model.content?.cells ?? []) as {
          metadata?: { tags?: unknown };
          source?: string | string[];
        }[];
        const cell = cells.find(
          c =>
            Array.isArray(c.metadata?.tags) &&
            (c.metadata!.tags as unknown[]).includes('parameters')
        );
        const source = [cell?.source ?? ''].flat().join('');
        parameters = readParameters(source).map(p =>
          p.name in before
            ? { name: p.name, source: pythonLiteral(before[p.name]) }
            : p
        );
      } catch {
        // The source notebook is gone: the last run's values are all there is.
        parameters = Object.entries(before).map(([name, value]) => ({
          name,
          source: pythonLiteral(value)
        }));
      }
    }
    const form = new ParametersForm(parameters, translator);
    const result = await showDialog({
      title: trans.__('Run %1 again as a Job: Parameters', job.name),
      body: form,
      buttons: [
        Dialog.cancelButton(),
        Dialog.okButton({
          label: trans.__('Run again on %1', job.accelerator ?? 'cpu')
        })
      ]
    });
    if (!result.button.accept || !job.path) {
      return undefined;
    }
    return submit(
      client,
      {
        path: job.path,
        accelerator: job.accelerator,
        parameters: { ...before, ...(result.value ?? {}) }
      },
      translator
    );
  }

  /**
   * Ask for the accelerator (the picker, starting on the notebook's choice) and the parameters,
   * save the notebook, and submit it; resolves with the job, or undefined when the user cancels.
   */
  export async function runAsJob(
    notebook: NotebookPanel,
    manager: IAcceleratorManager,
    client: JobsClient,
    save: () => Promise<void>,
    translator: ITranslator
  ): Promise<unknown> {
    const trans = translator.load('ferry');
    const metadata = notebook.model?.metadata ?? {};
    const choice = await chooseAccelerator({
      manager,
      value: readNotebookAccelerator(metadata)?.request ?? null,
      label: trans.__('Accelerator for the job'),
      purpose: {
        title: trans.__('Run %1 as a Job', notebook.context.path),
        accept: choice => trans.__('Run on %1…', choice),
        caption: trans.__(
          'Next: the parameters of the run. The job runs a copy of the saved notebook on the chosen accelerator; this notebook and its kernel stay as they are.'
        )
      },
      translator
    });
    if (!choice) {
      return undefined;
    }
    const cell = notebook.content.widgets.find(c => {
      const tags = c.model.getMetadata('tags');
      return Array.isArray(tags) && tags.includes('parameters');
    });
    const form = new ParametersForm(
      readParameters(cell?.model.sharedModel.getSource() ?? ''),
      translator,
      { schedule: true }
    );
    const result = await showDialog({
      title: trans.__('Run %1 as a Job: Parameters', notebook.context.path),
      body: form,
      buttons: [
        Dialog.cancelButton(),
        Dialog.okButton({ label: trans.__('Run') })
      ]
    });
    if (!result.button.accept) {
      return undefined;
    }
    try {
      // The job runs the file: what is on screen is saved first.
      await save();
    } catch (error) {
      await notStarted(
        trans.__(
          'The notebook could not be saved first: %1',
          error instanceof Error ? error.message : String(error)
        ),
        translator
      );
      return undefined;
    }
    return submit(
      client,
      {
        path: notebook.context.path,
        accelerator: choice.request,
        parameters: result.value ?? {},
        ...(form.startAt ? { start_at: form.startAt } : {})
      },
      translator
    );
  }

  /**
   * Submit a job and say that it started, or in a dialog why not; resolves with the job, or
   * undefined when the gateway refused it.
   */
  async function submit(
    client: JobsClient,
    request: IJobSubmitRequest,
    translator: ITranslator
  ): Promise<IJob | undefined> {
    try {
      const job = await client.submit(request);
      Notification.success(submittedNotice(job, translator), {
        autoClose: 5000
      });
      return job;
    } catch (error) {
      await notStarted((error as Error).message, translator);
      return undefined;
    }
  }

  /** Say in a dialog why a job was not started. */
  async function notStarted(
    why: string,
    translator: ITranslator
  ): Promise<void> {
    await showDialog({
      title: translator.load('ferry').__('The job was not started'),
      body: why,
      buttons: [Dialog.okButton()]
    });
  }
}
