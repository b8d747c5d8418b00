/**
 * Following a job: what its event stream carries, the followers of a job not over (each told every
 * event as it happens) and what a late follower is shown first (the cells and output kept so far,
 * in a {@link FollowerLog} capped in bytes, the one log every late follower reads), and a job that
 * is over replayed from its executed notebook.
 *
 * @packageDocumentation
 */
import { FollowerLog, type RestSchemas } from '../protocol';
import type { INotebook } from './notebook';
import type { IJobModel } from './records';

/** What a job's event stream carries. */
export type JobStreamEvent =
  | { type: 'state'; job: IJobModel }
  | { type: 'cell'; data: RestSchemas['JobCellEvent'] }
  | { type: 'output'; data: RestSchemas['JobOutputEvent'] }
  | { type: 'end'; job: IJobModel };

/** Who follows a job not over yet, and the cells and output kept for late followers (bounded). */
export class JobFollowers {
  /** Events a late follower gets, in order: the kept cells and output. */
  backlog(): JobStreamEvent[] {
    return [...this._backlog.since(0)];
  }

  /** Follow from now; returns the function that stops following. */
  add(listener: JobFollowers.Listener): () => void {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  /**
   * Tell every follower about `event`, and keep it for late ones if it is a cell or output (the
   * oldest go first past {@link JobFollowers.BACKLOG_BYTES}; the newest always stays). A follower
   * that throws is `failed`'s to report, and the others are told still.
   */
  publish(event: JobStreamEvent, failed: (error: Error) => void): void {
    if (event.type === 'output' || event.type === 'cell') {
      this._keep(event);
    }
    for (const listener of [...this._listeners]) {
      try {
        listener(event);
      } catch (error) {
        failed(error as Error);
      }
    }
  }

  /** Let every follower go. */
  clear(): void {
    this._listeners.clear();
  }

  private _keep(event: Extract<JobStreamEvent, { data: unknown }>): void {
    this._backlog.push(event, JSON.stringify(event.data).length);
  }

  private _listeners = new Set<JobFollowers.Listener>();
  /** The newest item stays even when it alone is over the cap: a late follower sees where it is. */
  private _backlog = new FollowerLog<JobStreamEvent>({
    maxBytes: JobFollowers.BACKLOG_BYTES,
    oversized: 'keep'
  });
}

/** The listener type and the cap of {@link JobFollowers}. */
export namespace JobFollowers {
  /** Gets a job's events. */
  export type Listener = (event: JobStreamEvent) => void;

  /** Bytes of a running job's output kept for late followers. */
  export const BACKLOG_BYTES = 1024 * 1024;
}

/**
 * What a follower of a job that is over gets: its state, its output from its executed notebook
 * (nbformat JSON; none when it has none or it cannot be read), its end.
 */
export function replayEnded(
  model: IJobModel,
  notebook: string | undefined
): JobStreamEvent[] {
  return [
    { type: 'state', job: model },
    ...Private.outputEvents(notebook),
    { type: 'end', job: model }
  ];
}

namespace Private {
  /**
   * The code cells of an executed notebook (nbformat JSON) and their outputs, as a stream's events,
   * cell by cell: each code cell that ran gets its marker (`cell`, without `elapsed`: the file does
   * not say when it ran), then its outputs, as a follower of the running job saw them.
   */
  export function outputEvents(text: string | undefined): JobStreamEvent[] {
    if (text === undefined) {
      return [];
    }
    let notebook: INotebook;
    try {
      notebook = JSON.parse(text) as INotebook;
    } catch {
      return [];
    }
    if (!Array.isArray(notebook.cells)) {
      return [];
    }
    const code = notebook.cells.filter(cell => cell?.cell_type === 'code');
    let position = 0;
    return notebook.cells.flatMap((cell, index) => {
      if (cell?.cell_type !== 'code') {
        return [];
      }
      position += 1;
      const outputs = Array.isArray(cell.outputs) ? cell.outputs : [];
      if (cell.execution_count == null && outputs.length === 0) {
        // It never ran (the job failed or stopped before it): no marker.
        return [];
      }
      return [
        {
          type: 'cell',
          data: { index, cell: position, cells: code.length }
        } as JobStreamEvent,
        ...outputs.map(
          (output: Record<string, unknown>) =>
            ({
              type: 'output',
              data: { index, output: joined(output) }
            }) as JobStreamEvent
        )
      ];
    });
  }

  /** An output as it was streamed: its multi-line strings joined (the file splits them). */
  function joined(output: Record<string, unknown>): Record<string, unknown> {
    const join = (value: unknown) =>
      Array.isArray(value) ? value.join('') : value;
    const copy: Record<string, unknown> = { ...output };
    if ('text' in copy) {
      copy.text = join(copy.text);
    }
    if (copy.data && typeof copy.data === 'object') {
      copy.data = Object.fromEntries(
        Object.entries(copy.data as Record<string, unknown>).map(([k, v]) => [
          k,
          /json$/.test(k) ? v : join(v)
        ])
      );
    }
    return copy;
  }
}
