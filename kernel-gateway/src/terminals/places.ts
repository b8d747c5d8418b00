/**
 * Where each terminal runs, kept in the state store (`terminal-places`) across a gateway restart:
 * terminals close with the gateway, and a page restoring a tab asks the restarted one for it by name.
 */
import type { Database } from 'lmdb';
import type { IAcceleratorRequest } from '../scheduler';
import type { StateStore } from '../store';

/** Where a terminal ran, as the store keeps it. */
export interface ITerminalPlace {
  /** "H100 ×1 on gpu-host-1", for the words of a terminal that cannot be restored. */
  where: string;
  owner?: string;
  /** The kernel it ran beside. */
  kernel?: string;
  /** The devices of its own it asked for. */
  accelerator?: IAcceleratorRequest;
  environment?: string;
}

/** The places of this run's terminals, and those of the last run not restored yet. */
export class TerminalPlaces {
  /** Reads the last run's places, then leaves the table to this run (a place lasts one restart). */
  constructor(store: StateStore | undefined) {
    this._table = store?.table<ITerminalPlace>('terminal-places');
    if (this._table) {
      for (const { key, value } of this._table.getRange()) {
        this._previous.set(String(key), value);
      }
      void this._table.clearAsync().catch(() => undefined);
    }
  }

  /** The last run's place of terminal `name`, once (it is forgotten as it is taken). */
  take(name: string): ITerminalPlace | undefined {
    const place = this._previous.get(name);
    this._previous.delete(name);
    return place;
  }

  /** The last run's place of `name`, left where it is. */
  peek(name: string): ITerminalPlace | undefined {
    return this._previous.get(name);
  }

  /** Where terminal `name` runs now. A failed write only loses its restore. */
  remember(name: string, place: ITerminalPlace): void {
    void this._table?.put(name, place).catch(() => undefined);
  }

  /** Terminal `name` closed for good (not with the gateway): nothing to restore. */
  forget(name: string): void {
    void this._table?.remove(name).catch(() => undefined);
  }

  /** "H100 ×1", "GPU ×2", "CPU" from a spec (`gpu:H100:1`, `gpu:2`, `cpu`). */
  static words(spec: string): string {
    const parts = spec.split(':');
    if (parts[0] === 'cpu' || parts.length < 2) {
      return 'CPU';
    }
    const [kind, model, count] =
      parts.length === 2 ? [parts[0], '', parts[1]] : parts;
    return `${model || kind.toUpperCase()} ×${count}`;
  }

  private _table: Database<ITerminalPlace, StateStore.Key> | undefined;
  private _previous = new Map<string, ITerminalPlace>();
}
