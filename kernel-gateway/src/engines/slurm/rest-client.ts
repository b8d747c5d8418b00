/**
 * Slurm through slurmrestd, Slurm's REST API: submit, follow and cancel jobs over HTTP or a unix
 * socket, signed in with a JWT.
 */
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import * as os from 'node:os';
import type {
  ISlurmClient,
  ISlurmJobInfo,
  ISlurmSubmission,
  ISlurmUser
} from './client';

/**
 * Talks to `slurmrestd` instead of running the Slurm commands: `POST .../job/submit`,
 * `GET .../job/{id}` and `DELETE .../job/{id}` of its OpenAPI plugin (`v0.0.38`, what Slurm 22.05
 * serves; the version is an option, for clusters whose slurmrestd serves a newer one with the same
 * shape).
 *
 * #### Notes
 * It authenticates as slurmrestd's `rest_auth/jwt` plugin expects: `X-SLURM-USER-NAME` and
 * `X-SLURM-USER-TOKEN` headers with a token from `scontrol token`. The token is read again from its
 * file for every request (tokens expire: rotate the file), and it never appears in an error message
 * or a log line. The URL is `unix:/path/to/socket` (slurmrestd's own notation), `http://host:port` or
 * `https://host:port`.
 *
 * A job for a signed-in person is submitted, followed and cancelled with `X-SLURM-USER-NAME` naming
 * them and the same token: slurmctld's user impersonation, which it grants a token of SlurmUser or
 * root only (`scontrol token username=<SlurmUser>`); with any other token it refuses the job.
 */
export class SlurmRestClient implements ISlurmClient {
  constructor(options: SlurmRestClient.IOptions) {
    this._options = options;
    this._target = Private.target(options.url);
    this._version = options.apiVersion ?? 'v0.0.38';
    // Read now: a missing or unreadable token stops start-up, not the first kernel.
    this._token();
  }

  get description(): string {
    return `slurmrestd at ${this._options.url}`;
  }

  /** The user the jobs run as: the option, else the token's `sun` claim, else this process's user. */
  get user(): string {
    return this._user(this._token());
  }

  async submit(job: ISlurmSubmission): Promise<string> {
    const properties: Record<string, unknown> = {
      name: job.name,
      gres: job.gres,
      nodes: [1, 1],
      tasks: 1,
      current_working_directory: job.cwd,
      standard_output: job.output,
      // A person's job has its own HOME and USER: what the engine gave is kept.
      environment: Private.environment(job.env, job.user === undefined)
    };
    if (job.partition) {
      properties.partition = job.partition;
    }
    if (job.timeLimit) {
      properties.time_limit = Private.minutes(job.timeLimit);
    }
    if (job.account) {
      properties.account = job.account;
    }
    for (const arg of job.extraArgs) {
      const [key, value] = Private.option(arg);
      properties[key] = value;
    }
    const answer = await this._request(
      'POST',
      '/job/submit',
      { script: job.script, job: properties },
      job.user
    );
    const id = answer.body?.job_id;
    if (typeof id !== 'number' || !Number.isSafeInteger(id)) {
      const as = job.user ? this._impersonation(job.user, answer) : '';
      throw new Error(
        `${this.description} refused the job${as}: ${Private.errors(answer) ?? `no job id in its answer (HTTP ${answer.status})`}`
      );
    }
    return String(id);
  }

  async states(ids: string[]): Promise<Map<string, ISlurmJobInfo | null>> {
    const states = new Map<string, ISlurmJobInfo | null>();
    await Promise.all(
      ids.map(async id => {
        const answer = await this._request(
          'GET',
          `/job/${encodeURIComponent(id)}`
        );
        const job = (answer.body?.jobs as Private.IJob[] | undefined)?.find(
          j => String(j.job_id) === id
        );
        if (job) {
          states.set(id, {
            state: String(job.job_state ?? 'UNKNOWN'),
            reason: String(job.state_reason ?? 'None'),
            timeLimit: Private.timeString(job.time_limit)
          });
        } else if (Private.invalidJob(answer)) {
          // Past MinJobAge, or never known: it is over.
          states.set(id, null);
        } else {
          throw new Error(
            `${this.description} could not say how job ${id} is: ${Private.errors(answer) ?? `HTTP ${answer.status}`}`
          );
        }
      })
    );
    return states;
  }

  async cancel(id: string, user?: ISlurmUser): Promise<void> {
    // A person's job is theirs to cancel: as them, as it was submitted.
    const answer = await this._request(
      'DELETE',
      `/job/${encodeURIComponent(id)}`,
      undefined,
      user
    );
    const error = Private.errors(answer);
    if (error) {
      throw new Error(
        `${this.description} could not cancel job ${id}: ${error}`
      );
    }
  }

  /**
   * Why slurmctld may have refused a job submitted as a person, where the token is not one it lets
   * impersonate: `' as alice (...)'`, else `' as alice'`.
   */
  private _impersonation(user: ISlurmUser, answer: Private.IAnswer): string {
    const tokenUser = this._user(answer.token);
    return tokenUser === user.name || tokenUser === 'root'
      ? ` as ${user.name}`
      : ` as ${user.name} (submitting as another user needs a token of SlurmUser or root, and this one is ${tokenUser}'s)`;
  }

  /**
   * Send one request (as `as`, impersonated, where given); resolve with the status and the parsed
   * body (undefined when not JSON).
   */
  private _request(
    method: string,
    route: string,
    body?: unknown,
    as?: ISlurmUser
  ): Promise<Private.IAnswer> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const token = this._token();
    const user = as?.name ?? this._user(token);
    const headers: http.OutgoingHttpHeaders = {
      accept: 'application/json',
      'x-slurm-user-name': user,
      'x-slurm-user-token': token
    };
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = Buffer.byteLength(payload);
    }
    const target = this._target;
    const what = `${this.description}: ${method} ${route}`;
    return new Promise((resolve, reject) => {
      const request = (target.secure ? https : http).request(
        {
          ...target.options,
          method,
          path: `${target.base}/slurm/${this._version}${route}`,
          headers,
          timeout: this._options.timeoutMs ?? 30_000
        },
        response => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', error =>
            reject(new Error(`${what}: ${error.message}`))
          );
          response.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const status = response.statusCode ?? 0;
            let parsed: Record<string, unknown> | undefined;
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = undefined;
            }
            if (status === 401 || status === 403) {
              reject(
                new Error(
                  `${this.description} did not accept the credentials of user ${user} (HTTP ${status} ${Private.clean(text, token) || 'Authentication failure'}): check the token (SLURM_JWT or the token file) and the user name`
                )
              );
            } else if (parsed === undefined && status >= 300) {
              reject(
                new Error(
                  `${what}: HTTP ${status} ${Private.clean(text, token)}`.trim()
                )
              );
            } else {
              resolve({ status, body: parsed, token });
            }
          });
        }
      );
      request.on('timeout', () =>
        request.destroy(new Error('no answer in time'))
      );
      request.on('error', error =>
        reject(new Error(`${what}: ${error.message}`))
      );
      request.end(payload);
    });
  }

  private _user(token: string): string {
    return (
      this._options.user ?? Private.tokenUser(token) ?? os.userInfo().username
    );
  }

  /** The token: the option, the token file's (read again each time), or `SLURM_JWT`. */
  private _token(): string {
    const { token, tokenFile } = this._options;
    let value = token;
    if (value === undefined && tokenFile) {
      try {
        value = readFileSync(tokenFile, 'utf8');
      } catch (error) {
        throw new Error(
          `cannot read the slurmrestd token file ${tokenFile}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`
        );
      }
    }
    value ??= process.env.SLURM_JWT;
    // As `scontrol token` prints it (`SLURM_JWT=...`), or the bare token.
    value = value?.trim().replace(/^SLURM_JWT=/, '');
    if (!value) {
      throw new Error(
        tokenFile
          ? `the slurmrestd token file ${tokenFile} is empty`
          : 'slurmrestd needs a token: set SLURM_JWT (from `scontrol token`) or give a token file'
      );
    }
    if (/[\r\n]/.test(value)) {
      throw new Error('the slurmrestd token is not one line');
    }
    return value;
  }

  private _options: SlurmRestClient.IOptions;
  private _target: Private.ITarget;
  private _version: string;
}

export namespace SlurmRestClient {
  export interface IOptions {
    /** `unix:/run/slurmrestd/slurmrestd.socket`, `http://host:6820` or `https://...`. */
    url: string;
    /** `X-SLURM-USER-NAME` (default: the token's user, else this process's user). */
    user?: string;
    /** The token itself (default: read from `tokenFile`, else `SLURM_JWT`). */
    token?: string;
    /** A file holding the token, as `scontrol token` prints it or bare; read for every request. */
    tokenFile?: string;
    /** The OpenAPI plugin version in the paths (default `v0.0.38`, Slurm 22.05). */
    apiVersion?: string;
    /** How long to wait for an answer (default 30 s). */
    timeoutMs?: number;
  }
}

namespace Private {
  export interface IAnswer {
    status: number;
    body: Record<string, unknown> | undefined;
    /** To keep out of anything quoted from the answer. */
    token: string;
  }

  export interface IJob {
    job_id?: number;
    job_state?: string;
    state_reason?: string;
    time_limit?: number;
  }

  export interface ITarget {
    secure: boolean;
    options: http.RequestOptions;
    base: string;
  }

  /** Where requests go: a unix socket (`unix:/path`) or an http(s) URL. */
  export function target(url: string): ITarget {
    if (url.startsWith('unix:')) {
      const socketPath = url.slice('unix:'.length).replace(/^\/\/(?=\/)/, '');
      if (!socketPath.startsWith('/')) {
        throw new Error(
          `bad slurmrestd URL '${url}': a unix socket needs an absolute path (unix:/run/slurmrestd.socket)`
        );
      }
      return { secure: false, options: { socketPath }, base: '' };
    }
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      parsed = new URL('invalid:');
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new Error(
        `bad slurmrestd URL '${url}': give unix:/path/to/socket, http://host:port or https://host:port`
      );
    }
    return {
      secure: parsed.protocol === 'https:',
      options: {
        hostname: parsed.hostname.replace(/^\[|\]$/g, ''),
        port: parsed.port || undefined
      },
      base: parsed.pathname.replace(/\/+$/, '')
    };
  }

  /** slurmrestd's `errors`, one line (empty entries dropped), or undefined when there are none. */
  export function errors(answer: IAnswer): string | undefined {
    const list = answer.body?.errors;
    if (!Array.isArray(list)) {
      return undefined;
    }
    const lines = list
      .map((e: Record<string, unknown>) => {
        const parts = [e.error, e.description].filter(
          (p, i, all): p is string =>
            typeof p === 'string' && p !== '' && all.indexOf(p) === i
        );
        const code = e.error_number ?? e.error_code;
        let line = parts.join(': ');
        if (line && code === 5005) {
          // What slurmctld's refusal of the credential looks like from slurmrestd.
          line +=
            ' (slurmctld closed the connection: usually a token it does not accept: expired, signed with another key, or not for this user)';
        }
        return line;
      })
      .filter(Boolean);
    return lines.length > 0 ? clean(lines.join('; '), answer.token) : undefined;
  }

  /** Whether slurmrestd said the job id is not (or no longer) known. */
  export function invalidJob(answer: IAnswer): boolean {
    const list = answer.body?.errors;
    return (
      Array.isArray(list) &&
      list.some(
        (e: Record<string, unknown>) =>
          e.error_number === 2017 ||
          e.error_code === 2017 ||
          /invalid job id/i.test(String(e.error ?? ''))
      )
    );
  }

  /** Text from the server, one line, short, never with the token in it. */
  export function clean(text: string, token: string): string {
    return text
      .split(token)
      .join('<token>')
      .replace(/\s+/g, ' ')
      .trim()
      .slice(0, 500);
  }

  /** The user a JWT names (`sun`), read without checking it: slurmctld checks it. */
  export function tokenUser(token: string): string | undefined {
    try {
      const claims = JSON.parse(
        Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')
      );
      return typeof claims?.sun === 'string' && claims.sun
        ? claims.sun
        : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Variables that name the gateway's own user: a job slurmrestd runs as another user must not
   * inherit them (its programs would look for their files in the gateway user's home).
   */
  const IDENTITY = new Set([
    'HOME',
    'USER',
    'LOGNAME',
    'MAIL',
    'PWD',
    'OLDPWD',
    'XDG_RUNTIME_DIR'
  ]);

  /**
   * The job's environment as v0.0.38 takes it: a dictionary of strings, without the gateway user's
   * identity (`stripIdentity`) unless the engine set the job's own.
   */
  export function environment(
    env: NodeJS.ProcessEnv,
    stripIdentity = true
  ): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [key, value] of Object.entries(env)) {
      if (value !== undefined && !(stripIdentity && IDENTITY.has(key))) {
        out[key] = value;
      }
    }
    return out;
  }

  /** The sbatch options an offer's `extraArgs` may hold that have a REST field. */
  const OPTIONS: Record<string, string> = {
    '--qos': 'qos',
    '--constraint': 'constraints',
    '--reservation': 'reservation',
    '--comment': 'comment',
    '--wckey': 'wckey'
  };

  export function option(arg: string): [string, string] {
    const match = /^(--[a-z-]+)=(.*)$/.exec(arg);
    const field = match && OPTIONS[match[1]];
    if (!match || !field) {
      throw new Error(
        `slurmrestd cannot take the sbatch option '${arg}' (it takes ${Object.keys(
          OPTIONS
        )
          .map(o => `${o}=...`)
          .join(', ')})`
      );
    }
    return [field, match[2]];
  }

  /**
   * Minutes from a Slurm time (`--time`): `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`; seconds
   * round up, as Slurm does.
   */
  export function minutes(time: string): number {
    const match = /^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$/.exec(time.trim());
    if (!match) {
      throw new Error(`bad Slurm time limit '${time}'`);
    }
    const [, d, a, b, c] = match;
    const n = (s: string | undefined) => (s === undefined ? 0 : Number(s));
    let seconds: number;
    if (d !== undefined) {
      // D-H, D-H:M, D-H:M:S
      seconds = n(d) * 86400 + n(a) * 3600 + n(b) * 60 + n(c);
    } else if (c !== undefined) {
      seconds = n(a) * 3600 + n(b) * 60 + n(c);
    } else {
      // M or M:S
      seconds = n(a) * 60 + n(b);
    }
    return Math.max(1, Math.ceil(seconds / 60));
  }

  /** A time limit in minutes as squeue writes it (`10:00`, `1:00:00`, `2-00:00:00`, `UNLIMITED`). */
  export function timeString(limit: unknown): string | undefined {
    if (typeof limit !== 'number' || !Number.isFinite(limit)) {
      return undefined;
    }
    if (limit === 0xffffffff) {
      return 'UNLIMITED';
    }
    if (limit >= 0xfffffffe || limit < 0) {
      return undefined;
    }
    const pad = (v: number) => String(v).padStart(2, '0');
    const days = Math.floor(limit / 1440);
    const hours = Math.floor((limit % 1440) / 60);
    const mins = limit % 60;
    if (days > 0) {
      return `${days}-${pad(hours)}:${pad(mins)}:00`;
    }
    return hours > 0 ? `${hours}:${pad(mins)}:00` : `${mins}:00`;
  }
}
