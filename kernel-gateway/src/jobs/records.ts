/**
 * Jobs' records and executed notebooks in the gateway's embedded store, so both survive a restart.
 * The newest {@link JobRecords.KEEP} jobs are kept; older ones that are over go, notebook and all.
 *
 * @packageDocumentation
 */
import type { Database } from 'lmdb';
import type { RestSchemas } from '../protocol';
import type { StateStore } from '../store';

/** The REST model of a job (schema `Job`). */
export type IJobModel = RestSchemas['Job'];

/** A job as the gateway keeps it: its REST model, and what only the gateway needs. */
export interface IJobRecord extends IJobModel {
  /** Who submitted it (the principal the per-user limit counts for). */
  user: string;
  /** Whether its worker is remote (a job there may outlive a gateway restart). */
  remote?: boolean;
  /** Order of submission, oldest first. */
  seq: number;
  /** A scheduled job's kernel start, as asked for at submission (until it runs). */
  launch?: IJobLaunch;
}

/** What a scheduled job's kernel is started with when its time comes. */
export interface IJobLaunch {
  env: Record<string, string>;
  cwd?: string;
  /** The accelerator asked for (`requestedAccelerator`'s answer: a request or an offer). */
  target: Record<string, unknown>;
}

/** The states a job ends in. */
export const FINAL_STATES: ReadonlySet<RestSchemas['JobState']> = new Set([
  'succeeded',
  'failed',
  'cancelled',
  'timed-out',
  'lost'
]);

/** Jobs' records and notebooks, in two tables of the store. */
export class JobRecords {
  constructor(store: StateStore) {
    this._records = store.table<IJobRecord>('jobs');
    this._notebooks = store.table<string>('job-notebooks');
    // Read once: records are few (at most KEEP) and read often; writes go through to the store.
    for (const { value } of this._records.getRange()) {
      this._cache.set(value.id, value);
      this._seq = Math.max(this._seq, value.seq);
    }
  }

  /** The `seq` of the next job submitted: after every job this store has held. */
  nextSeq(): number {
    return ++this._seq;
  }

  /** Every record, oldest first. */
  all(): IJobRecord[] {
    return [...this._cache.values()].sort((a, b) => a.seq - b.seq);
  }

  get(id: string): IJobRecord | undefined {
    return this._cache.get(id);
  }

  /**
   * Keep a record; resolves once it is on disk. A write the store refuses (a full disk) rejects,
   * and is no crash for callers that do not wait for it (the store logs it).
   */
  put(record: IJobRecord): Promise<void> {
    this._cache.set(record.id, record);
    const written = this._records.put(record.id, record).then(() => undefined);
    written.catch(() => undefined);
    return written;
  }

  /** Keep a job's executed notebook (nbformat JSON); resolves once it is on disk. */
  async putNotebook(id: string, notebook: string): Promise<void> {
    this._withNotebook.add(id);
    await this._notebooks.put(id, notebook);
  }

  /** The notebook a scheduled job will run (its parameters injected); resolves once on disk. */
  async putInput(id: string, notebook: string): Promise<void> {
    await this._notebooks.put(Private.input(id), notebook);
  }

  /** The notebook a scheduled job will run. */
  input(id: string): string | undefined {
    return this._notebooks.get(Private.input(id));
  }

  /** A scheduled job's notebook is its worker's now, or never will be. */
  dropInput(id: string): void {
    void this._notebooks.remove(Private.input(id)).catch(() => undefined);
  }

  /** A job's executed notebook, once it is on disk. */
  notebook(id: string): string | undefined {
    return this._notebooks.get(id);
  }

  /** Whether a job has an executed notebook. */
  hasNotebook(id: string): boolean {
    return this._withNotebook.has(id) || this._notebooks.doesExist(id);
  }

  /** The REST model of a record: its duration as of now, and whether it has a notebook. */
  model(record: IJobRecord): IJobModel {
    const {
      user: _user,
      remote: _remote,
      seq: _seq,
      launch: _launch,
      ...model
    } = record;
    if (record.started) {
      const end = record.finished ? Date.parse(record.finished) : Date.now();
      model.duration = Math.max(0, (end - Date.parse(record.started)) / 1000);
    }
    model.has_notebook = this.hasNotebook(record.id);
    return model;
  }

  /** Forget a job and its notebook. */
  delete(id: string): void {
    this._cache.delete(id);
    this._withNotebook.delete(id);
    void this._records.remove(id);
    void this._notebooks.remove(id);
    this.dropInput(id);
  }

  /** Forget the oldest jobs that are over, past the newest {@link JobRecords.KEEP}. */
  prune(): void {
    const records = this.all();
    let excess = records.length - JobRecords.KEEP;
    for (const record of records) {
      if (excess <= 0) {
        break;
      }
      if (FINAL_STATES.has(record.state)) {
        this.delete(record.id);
        excess--;
      }
    }
  }

  private _cache = new Map<string, IJobRecord>();
  private _withNotebook = new Set<string>();
  private _seq = 0;
  private _records: Database<IJobRecord, StateStore.Key>;
  private _notebooks: Database<string, StateStore.Key>;
}

namespace Private {
  /** The key of a scheduled job's notebook in the notebooks' table. */
  export function input(id: string): string {
    return `input:${id}`;
  }
}

export namespace JobRecords {
  /** How many jobs are remembered at most (those over go first, oldest first). */
  export const KEEP = 500;
}
