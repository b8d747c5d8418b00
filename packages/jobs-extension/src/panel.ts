/**
 * The Jobs panel: every job of the gateway with its state, a progress bar of its cells, its
 * accelerator and duration, links to its executed notebook and its log (a tab of the lab), and
 * cancel. Refreshed by a lumino Poll (standby while hidden).
 */
import {
  nullTranslator,
  type ITranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import { Poll } from '@lumino/polling';
import { h, VirtualDOM, type VirtualElement } from '@lumino/virtualdom';
import { Widget } from '@lumino/widgets';
import type { IJob, JobsClient } from './client';

/** The states a job ends in. */
const FINAL = new Set<IJob['state']>([
  'succeeded',
  'failed',
  'cancelled',
  'timed-out',
  'lost'
]);

/** The Jobs panel. */
export class JobsPanel extends Widget {
  constructor(options: JobsPanel.IOptions) {
    super();
    this._client = options.client;
    this._open = options.open;
    this._showLog = options.showLog;
    this._rerun = options.rerun ?? (() => undefined);
    this._trans = (options.translator ?? nullTranslator).load('ferry');
    this.id = 'jp-ferry-jobs';
    this.addClass('jp-FerryJobs');
    this.title.caption = this._trans.__(
      'Jobs: notebooks run headless on accelerators'
    );
    this._poll = new Poll({
      factory: () => this.refresh(),
      frequency: { interval: 2000, backoff: true, max: 30000 },
      standby: () => !this.isVisible && 'when-hidden'
    });
  }

  /** The jobs as last read. */
  get jobs(): readonly IJob[] {
    return this._jobs;
  }

  /** Read the jobs now and render them. */
  async refresh(): Promise<void> {
    try {
      this._jobs = await this._client.list();
      this._error = '';
    } catch (error) {
      this._error = (error as Error).message;
    }
    this._render();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    super.dispose();
  }

  protected onAfterShow(): void {
    void this._poll.refresh();
  }

  private _render(): void {
    const trans = this._trans;
    const rows = this._jobs.map(job => this._row(job));
    VirtualDOM.render(
      [
        h.div({ className: 'jp-FerryJobs-header' }, trans.__('Jobs')),
        ...(this._error
          ? [
              h.div(
                { className: 'jp-FerryJobs-error', role: 'alert' },
                this._error
              )
            ]
          : []),
        rows.length > 0
          ? h.ul({ className: 'jp-FerryJobs-list' }, ...rows)
          : h.div(
              { className: 'jp-FerryJobs-empty' },
              trans.__('No jobs yet: "Run as Job…" on a notebook starts one.')
            )
      ],
      this.node
    );
  }

  private _row(job: IJob): VirtualElement {
    const trans = this._trans;
    const cells = job.cells ?? 0;
    const done = FINAL.has(job.state)
      ? job.state === 'succeeded'
        ? cells
        : Math.max(0, (job.cell ?? 0) - 1)
      : Math.max(0, (job.cell ?? 0) - 1);
    const state =
      Private.stateLabel(trans, job.state) +
      (job.position ? ' ' + trans.__('(#%1 in the queue)', job.position) : '') +
      (job.state === 'scheduled' && job.start_at
        ? ' ' + trans.__('for %1', Private.when(job.start_at))
        : '') +
      (job.state === 'running'
        ? ' · ' + trans.__('cell %1 of %2', job.cell ?? 0, cells)
        : '');
    const links: VirtualElement[] = [];
    if (job.has_notebook) {
      links.push(
        job.output_path
          ? h.button(
              {
                className: 'jp-FerryJobs-open',
                title: trans.__('Open %1', job.output_path),
                onclick: () => this._open(job.output_path!)
              },
              trans.__('Notebook')
            )
          : h.a(
              {
                className: 'jp-FerryJobs-download',
                href: this._client.notebookUrl(job.id),
                download: job.name
              },
              trans.__('Notebook')
            )
      );
    }
    links.push(
      h.button(
        {
          className: 'jp-FerryJobs-logs',
          title: trans.__(
            'Show the log in a tab, live, with the executed notebook beside it'
          ),
          onclick: () => this._showLog(job)
        },
        trans.__('Log')
      )
    );
    links.push(
      h.button(
        {
          className: 'jp-FerryJobs-rerun',
          title: trans.__(
            'Run this notebook again on %1, with other parameters',
            job.accelerator
          ),
          onclick: () => this._rerun(job)
        },
        trans.__('Run again…')
      )
    );
    if (!FINAL.has(job.state)) {
      links.push(
        h.button(
          {
            className: 'jp-FerryJobs-cancel',
            title: trans.__(
              'Cancel this job: its kernel is shut down and its devices freed'
            ),
            onclick: () => void this._cancel(job.id)
          },
          trans.__('Cancel')
        )
      );
    }
    return h.li(
      {
        className: `jp-FerryJobs-job jp-mod-${job.state}`,
        dataset: { jobId: job.id, state: job.state }
      },
      h.div({ className: 'jp-FerryJobs-name', title: job.id }, job.name),
      h.div({ className: 'jp-FerryJobs-state' }, state),
      h.progress({
        className: 'jp-FerryJobs-progress',
        max: String(Math.max(cells, 1)),
        value: String(done)
      }),
      h.div(
        { className: 'jp-FerryJobs-details' },
        (job.worker_name
          ? trans.__('%1 on %2', job.accelerator, job.worker_name)
          : job.accelerator) +
          (job.duration !== undefined
            ? ' · ' + trans.__('%1 s', job.duration.toFixed(1))
            : '')
      ),
      ...(job.reason && job.state !== 'succeeded'
        ? [h.div({ className: 'jp-FerryJobs-reason' }, job.reason)]
        : []),
      h.div({ className: 'jp-FerryJobs-links' }, links)
    );
  }

  private async _cancel(id: string): Promise<void> {
    try {
      await this._client.cancel(id);
    } catch (error) {
      this._error = (error as Error).message;
    }
    await this.refresh();
  }

  private _client: JobsClient;
  private _trans: TranslationBundle;
  private _open: (path: string) => void;
  private _showLog: (job: IJob) => void;
  private _rerun: (job: IJob) => void;
  private _poll: Poll;
  private _jobs: IJob[] = [];
  private _error = '';
}

/**
 * What the page says once a job is submitted: its name, state, place in the queue and where its
 * executed notebook goes.
 *
 * @param job - The job as the gateway answered the submission.
 * @param translator - The application's translator.
 */
export function submittedNotice(
  job: IJob,
  translator: ITranslator = nullTranslator
): string {
  const trans = translator.load('ferry');
  const state =
    Private.stateLabel(trans, job.state) +
    (job.state === 'scheduled' && job.start_at
      ? ' ' + trans.__('for %1', Private.when(job.start_at))
      : '');
  const where =
    job.output_path ??
    trans.__('the gateway (Download it from the Jobs panel)');
  return job.position
    ? trans.__(
        'Job %1 %2 (#%3 in the queue): the executed notebook goes to %4',
        job.name,
        state,
        job.position,
        where
      )
    : trans.__(
        'Job %1 %2: the executed notebook goes to %3',
        job.name,
        state,
        where
      );
}

/** The options of {@link JobsPanel}. */
export namespace JobsPanel {
  export interface IOptions {
    client: JobsClient;
    /** Open a notebook under the root (the executed one). */
    open: (path: string) => void;
    /** Show a job's log in the lab. */
    showLog: (job: IJob) => void;
    /** Run a job's notebook again, asking for other parameters. */
    rerun?: (job: IJob) => void;
    /** The application's translator (its words in English without one). */
    translator?: ITranslator;
  }
}

namespace Private {
  /** A start time as the page's clock reads it: "28 Nov, 22:00" (the year when not this one). */
  export function when(iso: string): string {
    const at = new Date(iso);
    return at.toLocaleString(undefined, {
      ...(at.getFullYear() !== new Date().getFullYear()
        ? { year: 'numeric' }
        : {}),
      day: 'numeric',
      month: 'short',
      hour: '2-digit',
      minute: '2-digit'
    });
  }

  /** A job's state in words (the same word in English). */
  export function stateLabel(
    trans: TranslationBundle,
    state: IJob['state']
  ): string {
    switch (state) {
      case 'scheduled':
        return trans.__('scheduled');
      case 'queued':
        return trans.__('queued');
      case 'starting':
        return trans.__('starting');
      case 'running':
        return trans.__('running');
      case 'succeeded':
        return trans.__('succeeded');
      case 'failed':
        return trans.__('failed');
      case 'cancelled':
        return trans.__('cancelled');
      case 'timed-out':
        return trans.__('timed-out');
      case 'lost':
        return trans.__('lost');
    }
  }
}
