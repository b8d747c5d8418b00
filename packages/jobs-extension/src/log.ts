/**
 * A job's log inside the lab: a main-area tab that follows the job's event stream
 * (`/api/jobs/{id}/events`, server-sent events) live: its states, each cell as it starts, and each
 * output (printed text, results, errors) as it comes. The executed notebook opens beside it.
 */
import { ServerConnection } from '@jupyterlab/services';
import {
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';
import type { IJob, JobsClient } from './client';

/** One server-sent event. */
export interface IServerEvent {
  event: string;
  data: string;
}

/**
 * Splits server-sent event text into events; returns them and what is left of an event not yet
 * whole.
 */
export function parseEvents(text: string): {
  events: IServerEvent[];
  rest: string;
} {
  const events: IServerEvent[] = [];
  const blocks = text.replace(/\r\n/g, '\n').split('\n\n');
  const rest = blocks.pop() ?? '';
  for (const block of blocks) {
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('event:')) {
        event = line.slice(6).trim();
      } else if (line.startsWith('data:')) {
        data.push(line.slice(5).replace(/^ /, ''));
      }
    }
    if (data.length > 0) {
      events.push({ event, data: data.join('\n') });
    }
  }
  return { events, rest };
}

/** The text an nbformat output shows in a log. */
export function outputText(output: Record<string, unknown>): string {
  const join = (value: unknown) =>
    Array.isArray(value) ? value.join('') : String(value ?? '');
  switch (output.output_type) {
    case 'stream':
      return join(output.text);
    case 'error':
      return `${String(output.ename)}: ${String(output.evalue)}\n`;
    default: {
      const data = (output.data ?? {}) as Record<string, unknown>;
      return 'text/plain' in data ? join(data['text/plain']) + '\n' : '';
    }
  }
}

/** The live log of one job. */
export class JobLog extends Widget {
  constructor(options: JobLog.IOptions) {
    super();
    this._options = options;
    this._trans = options.trans ?? nullTranslator.load('ferry');
    this.id = `jp-ferry-job-log-${options.job.id}`;
    this.addClass('jp-FerryJobLog');
    this.title.label = this._trans.__('Log: %1', options.job.name);
    this.title.closable = true;
    this._state = document.createElement('div');
    this._state.className = 'jp-FerryJobLog-state';
    this._state.setAttribute('role', 'status');
    this._lines = document.createElement('pre');
    this._lines.className = 'jp-FerryJobLog-lines';
    this._lines.setAttribute('aria-label', this._trans.__('Job log'));
    this.node.append(this._state, this._lines);
    this._showState(options.job);
    void this._follow();
  }

  dispose(): void {
    this._abort.abort();
    super.dispose();
  }

  private async _follow(): Promise<void> {
    const { client, job } = this._options;
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(
        client.eventsUrl(job.id),
        { signal: this._abort.signal },
        client.serverSettings
      );
    } catch (error) {
      this._append(`${(error as Error).message}\n`, 'jp-mod-error');
      return;
    }
    if (!response.ok || !response.body) {
      this._append(
        this._trans.__('The log could not be read (%1)', response.status) +
          '\n',
        'jp-mod-error'
      );
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let rest = '';
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch {
        return;
      }
      if (chunk.done) {
        return;
      }
      const parsed = parseEvents(
        rest + decoder.decode(chunk.value, { stream: true })
      );
      rest = parsed.rest;
      for (const event of parsed.events) {
        this._handle(event);
      }
    }
  }

  private _handle(event: IServerEvent): void {
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(event.data) as Record<string, unknown>;
    } catch {
      return;
    }
    switch (event.event) {
      case 'state':
      case 'end': {
        const job = data as unknown as IJob;
        this._showState(job);
        if (event.event === 'end') {
          this._options.ended?.(job);
        }
        break;
      }
      case 'cell':
        this._append(
          this._trans.__('— cell %1 of %2 —', data.cell, data.cells) + '\n',
          'jp-mod-cell'
        );
        break;
      case 'output': {
        const output = (data.output ?? {}) as Record<string, unknown>;
        this._append(
          outputText(output),
          output.output_type === 'error' ? 'jp-mod-error' : ''
        );
        break;
      }
    }
  }

  private _showState(job: IJob): void {
    this.node.dataset.state = job.state;
    this._state.textContent = this._trans.__('%1 · %2', job.name, job.state);
  }

  private _append(text: string, className: string): void {
    if (!text) {
      return;
    }
    const span = document.createElement('span');
    span.className = className;
    span.textContent = text;
    const atEnd =
      this._lines.scrollTop + this._lines.clientHeight >=
      this._lines.scrollHeight - 4;
    this._lines.append(span);
    if (atEnd) {
      this._lines.scrollTop = this._lines.scrollHeight;
    }
  }

  private readonly _options: JobLog.IOptions;
  private readonly _trans: TranslationBundle;
  private readonly _state: HTMLElement;
  private readonly _lines: HTMLElement;
  private readonly _abort = new AbortController();
}

export namespace JobLog {
  export interface IOptions {
    client: JobsClient;
    job: IJob;
    trans?: TranslationBundle;
    /** Called with the final job once it ended. */
    ended?: (job: IJob) => void;
  }
}
