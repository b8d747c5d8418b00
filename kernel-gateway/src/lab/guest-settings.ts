import type { RestSchemas } from '../protocol';
import { LabApiError } from './errors';
import type { SettingsStore } from './settings';

type ISettingsEntry = RestSchemas['SettingsEntry'];

/**
 * The lab settings of share links' visitors: each visitor starts from the schemas' defaults (never
 * the owner's settings) and what they save is theirs alone, kept in memory (gone with a gateway
 * restart), never written to the owner's settings folder. Bounded: a visitor keeps at most
 * {@link GuestSettings.BYTES_PER_GUEST} of settings, and the least recently used visitors are
 * forgotten past {@link GuestSettings.GUESTS}.
 */
export class GuestSettings {
  constructor(
    private _store: SettingsStore,
    private _limits: { bytesPerGuest?: number; guests?: number } = {}
  ) {}

  /** Every plugin's entry as `guest` sees it. */
  async list(guest: string): Promise<ISettingsEntry[]> {
    return Promise.all(
      (await this._store.ids()).map(id => this.get(guest, id))
    );
  }

  /**
   * One plugin's entry as `guest` sees it: the defaults, or what they saved.
   *
   * @throws LabApiError 404 for an unknown plugin.
   */
  async get(guest: string, id: string): Promise<ISettingsEntry> {
    return this._store.entryOf(id, this._touch(guest)?.get(id));
  }

  /**
   * Keep `raw` as `guest`'s settings of plugin `id`, once the schema takes it.
   *
   * @throws LabApiError 400 for settings the schema refuses, 404 for an unknown plugin, 413 past
   * what one visitor may keep.
   */
  async save(guest: string, id: string, raw: string): Promise<void> {
    await this._store.check(id, raw);
    const mine = this._touch(guest) ?? new Map<string, string>();
    const max = this._limits.bytesPerGuest ?? GuestSettings.BYTES_PER_GUEST;
    let bytes = Buffer.byteLength(raw);
    for (const [other, value] of mine) {
      bytes += other === id ? 0 : Buffer.byteLength(value);
    }
    if (bytes > max) {
      throw new LabApiError(
        413,
        `A share link's visitor keeps at most ${max} bytes of settings`
      );
    }
    mine.set(id, raw);
    this._guests.set(guest, mine);
    const guests = this._limits.guests ?? GuestSettings.GUESTS;
    for (const oldest of this._guests.keys()) {
      if (this._guests.size <= guests) {
        break;
      }
      this._guests.delete(oldest);
    }
  }

  /** `guest`'s settings, now the most recently used. */
  private _touch(guest: string): Map<string, string> | undefined {
    const mine = this._guests.get(guest);
    if (mine) {
      this._guests.delete(guest);
      this._guests.set(guest, mine);
    }
    return mine;
  }

  private _guests = new Map<string, Map<string, string>>();
}

export namespace GuestSettings {
  /** The settings one visitor may keep, all plugins together: 64 KiB. */
  export const BYTES_PER_GUEST = 64 * 1024;
  /** Visitors whose settings are kept at once (the least recently used go first). */
  export const GUESTS = 1000;
}
