/**
 * What the quota and usage specs share: a profiles file of quota rows in a directory of its own,
 * and the gateway's quota events as one subscriber (a token, or a signed-in user's cookie) sees them.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';

/** The schema of the quota events (levels, returns) on `/api/events/subscribe`. */
const QUOTA_SCHEMA = 'https://ferry.dev/events/quota/v1';

/**
 * `profiles.yaml` of these lines in a fresh temporary directory (the caller removes `dir`).
 *
 * @param name - in the directory's name, to tell a leftover's suite.
 */
export function profilesFile(
  name: string,
  lines: string[]
): { dir: string; profiles: string } {
  const dir = mkdtempSync(path.join(tmpdir(), `ferry-${name}-`));
  const profiles = path.join(dir, 'profiles.yaml');
  writeFileSync(profiles, [...lines, ''].join('\n'));
  return { dir, profiles };
}

/** The quota events the gateway at `url` streams to one subscriber, in the order they came. */
export class QuotaEvents {
  /**
   * Subscribe, and resolve once the stream is open.
   *
   * @param auth - the API token, or a signed-in user's session cookie.
   */
  static async open(
    url: string,
    auth: { token: string } | { cookie: string }
  ): Promise<QuotaEvents> {
    const base = `${url.replace(/^http/, 'ws')}/api/events/subscribe`;
    const socket =
      'token' in auth
        ? new WebSocket(`${base}?token=${auth.token}`)
        : new WebSocket(base, { headers: { Cookie: auth.cookie } });
    const events = new QuotaEvents(socket);
    await new Promise(resolve => socket.once('open', resolve));
    return events;
  }

  private constructor(private readonly _socket: WebSocket) {
    _socket.on('message', data => {
      const event = JSON.parse(String(data)) as Record<string, unknown>;
      if (event.schema_id !== QUOTA_SCHEMA) {
        return;
      }
      this.events.push(event);
      for (const waiter of this._waiters.filter(w => w.test(event))) {
        this._waiters.splice(this._waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    });
  }

  /** Every quota event so far. */
  readonly events: Record<string, unknown>[] = [];

  /** Resolves once an event that passes `test` has come (at once if one has). */
  until(test: (event: Record<string, unknown>) => boolean): Promise<void> {
    return this.events.some(test)
      ? Promise.resolve()
      : new Promise(resolve => this._waiters.push({ test, resolve }));
  }

  close(): void {
    this._socket.close();
  }

  private readonly _waiters: {
    test: (event: Record<string, unknown>) => boolean;
    resolve: () => void;
  }[] = [];
}
