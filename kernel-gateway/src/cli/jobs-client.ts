/**
 * A client of a gateway's `/api/jobs`, for `ferry run` and `ferry jobs`: submit, list, read,
 * cancel, follow a job's server-sent events, download its executed notebook.
 *
 * @packageDocumentation
 */
import { createParser } from 'eventsource-parser';
import type { RestSchemas } from '../protocol';

/** A job as the REST API returns it. */
export type IJob = RestSchemas['Job'];

/** An event of a job's stream. */
export type JobClientEvent =
  | { type: 'state' | 'end'; job: IJob }
  | { type: 'cell'; data: RestSchemas['JobCellEvent'] }
  | { type: 'output'; data: RestSchemas['JobOutputEvent'] };

/** An answer other than the one asked for: the gateway's `{reason, message}`. */
export class JobClientError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}

/** A gateway's jobs (and its kernels, for `ferry kernels`), over HTTP with the owner's token. */
export class JobsClient {
  constructor(options: JobsClient.IOptions) {
    this._url = options.url.replace(/\/+$/, '');
    this._token = options.token;
  }

  /** Submit a job. @throws JobClientError with the gateway's message. */
  async submit(request: RestSchemas['JobSubmitRequest']): Promise<IJob> {
    return (await this._json('POST', '/api/jobs', request)) as IJob;
  }

  async list(): Promise<IJob[]> {
    return (await this._json('GET', '/api/jobs')) as IJob[];
  }

  /** The kernels the token's owner may see (`/api/kernels`). */
  async kernels(): Promise<RestSchemas['Kernel'][]> {
    return (await this._json('GET', '/api/kernels')) as RestSchemas['Kernel'][];
  }

  async get(id: string): Promise<IJob> {
    return (await this._json(
      'GET',
      `/api/jobs/${encodeURIComponent(id)}`
    )) as IJob;
  }

  /** Cancel a job; resolves with it as it ended. */
  async cancel(id: string): Promise<IJob> {
    return (await this._json(
      'DELETE',
      `/api/jobs/${encodeURIComponent(id)}`
    )) as IJob;
  }

  /** The executed notebook, as nbformat JSON text. */
  async notebook(id: string): Promise<string> {
    const response = await this._fetch(
      'GET',
      `/api/jobs/${encodeURIComponent(id)}/notebook`
    );
    return response.text();
  }

  /**
   * Follow a job: its state, the output kept so far, then every event until `end` (the last one
   * yielded). Stops early when `signal` aborts.
   */
  async *follow(
    id: string,
    signal?: AbortSignal
  ): AsyncGenerator<JobClientEvent> {
    const response = await this._fetch(
      'GET',
      `/api/jobs/${encodeURIComponent(id)}/events`,
      undefined,
      signal
    );
    const pending: JobClientEvent[] = [];
    const parser = createParser({
      onEvent: message => {
        const data = JSON.parse(message.data) as unknown;
        const type = message.event as JobClientEvent['type'];
        pending.push(
          type === 'state' || type === 'end'
            ? { type, job: data as IJob }
            : ({ type, data } as JobClientEvent)
        );
      }
    });
    const decoder = new TextDecoder();
    const body = response.body;
    if (!body) {
      return;
    }
    try {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        parser.feed(decoder.decode(chunk, { stream: true }));
        while (pending.length > 0) {
          const event = pending.shift()!;
          yield event;
          if (event.type === 'end') {
            return;
          }
        }
      }
    } catch (error) {
      if (signal?.aborted) {
        return;
      }
      throw error;
    }
  }

  private async _json(
    method: string,
    path: string,
    body?: unknown
  ): Promise<unknown> {
    const response = await this._fetch(method, path, body);
    return response.json();
  }

  private async _fetch(
    method: string,
    path: string,
    body?: unknown,
    signal?: AbortSignal
  ): Promise<Response> {
    const headers: Record<string, string> = {};
    if (this._token) {
      headers.Authorization = `token ${this._token}`;
    }
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
    }
    const response = await fetch(this._url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal
    });
    if (!response.ok) {
      const text = await response.text();
      let message = text;
      try {
        message = (JSON.parse(text) as { message?: string }).message ?? text;
      } catch {
        // not JSON: the text as it is
      }
      throw new JobClientError(
        response.status,
        `${response.status} ${response.statusText}: ${message}` +
          (response.status === 401 ? Private.tokenHint(this._token) : '')
      );
    }
    return response;
  }

  private _url: string;
  private _token: string | undefined;
}

namespace Private {
  /** What to do about a refused token: where `ferry run` and `ferry jobs` read one. */
  export function tokenHint(token: string | undefined): string {
    return token === undefined
      ? ". No token was given: put the gateway's token (printed at its start, and kept in its state directory's `token` file) in FERRY_TOKEN, or name a file holding it with --token-file"
      : ". The token given (FERRY_TOKEN or --token-file) is not this gateway's: use the one it printed at its start";
  }
}

/** The options of {@link JobsClient}. */
export namespace JobsClient {
  export interface IOptions {
    /** The gateway, `http://host:port`. */
    url: string;
    /** The owner's token (never printed). */
    token?: string;
  }
}
