/**
 * `ferry run notebook.ipynb`: run a notebook headless on an accelerator, on a gateway (`--gateway`)
 * or on one started in this process, with a progress line and the notebook's output on the
 * terminal; the executed notebook is written locally. Exits non-zero when the job does not succeed
 * (for CI); Ctrl-C cancels it. `--at` schedules it for later instead. `ferry jobs` lists a gateway's
 * jobs, `ferry jobs logs ID` follows one, `ferry jobs cancel ID` cancels one.
 */
import { mkdtempSync, promises as fs, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Command } from 'commander';
import { formatDuration } from '../accounting/durations';
import { createHostWorker } from '../agent';
import { TokenIdentityResolver } from '../auth';
import { createGateway } from '../gateway';
import { createLogger } from '../log';
import {
  JobClientError,
  JobsClient,
  type IJob,
  type JobClientEvent
} from './jobs-client';
import { number } from '../options';
import {
  gatewayClient,
  gatewayOptions,
  type IGatewayFlags
} from './gateway-client';
import { refusedSecret } from './options';
import {
  formatStartTime,
  parseStartTime,
  START_TIME_FORMS,
  StartTimeError
} from './start-time';
import { textTable } from './table';
import { VERSION } from './version';

/** The exit status of a job that did not succeed, and of a request the gateway refused. */
export const EXIT_FAILED = 1;
export const EXIT_REFUSED = 2;
/** Ctrl-C: the job was cancelled. */
export const EXIT_CANCELLED = 130;

/** The `ferry run` command. */
export function runCommand(): Command {
  const run = new Command('run')
    .description(
      'Run a notebook headless (a job) and write the executed notebook'
    )
    .argument(
      '<notebook>',
      'the notebook file (read here and sent to the gateway)'
    )
    .option(
      '--accelerator <spec>',
      'what to run on: gpu:H100:1, tpu:v5e:4, offer:<name>, cpu'
    )
    .option(
      '-p, --parameter <name=value>',
      'a parameter, injected as papermill does (repeatable; True/False/None, numbers and JSON lists/objects are read as such, anything else is a string)',
      (value: string, previous: string[]) => [...previous, value],
      [] as string[]
    )
    .option('--kernel <name>', "the kernelspec (default: the notebook's)")
    .option(
      '--gateway <url>',
      'the gateway to run on (default: one started in this process)'
    )
    .option(
      '--token-file <file>',
      'a file holding the gateway token (- reads standard input); else FERRY_TOKEN'
    )
    .option(
      '-o, --output <file>',
      'where to write the executed notebook (default: <notebook>.executed.ipynb beside it)'
    )
    .option(
      '--timeout <seconds>',
      'stop the job after this many seconds of running',
      number
    )
    .option(
      '--detach',
      'submit, print the job id and exit (follow it with `ferry jobs logs ID`)'
    )
    .option(
      '--at <time>',
      `schedule it to start later, and exit (needs --gateway): ${START_TIME_FORMS}`
    )
    .option(
      '--simulate <spec>',
      'simulated devices for the gateway started in this process, e.g. gpu:H100:2'
    )
    .option(
      '--no-discover',
      'the gateway started in this process looks for no real accelerators'
    );
  run.addOption(refusedSecret(run, '--token', 'FERRY_TOKEN', '--token-file'));
  run.action(async (notebook: string, flags: Private.IRunFlags) => {
    process.exitCode = await Private.run(notebook, flags);
  });
  return run;
}

/** The `ferry jobs` command: list, follow (`logs`) and cancel a gateway's jobs. */
export function jobsCommand(): Command {
  const jobs = gatewayOptions(
    new Command('jobs').description("List a gateway's jobs")
  ).action(async (flags: IGatewayFlags) => {
    const client = await gatewayClient(flags);
    const list = await client.list();
    process.stdout.write(Private.table(list));
  });
  jobs
    .command('logs')
    .description(
      'Follow a job: its progress and output until it ends; exits non-zero unless it succeeded'
    )
    .argument('<id>', 'the job id (or its first characters)')
    .action(async (id: string, _options: unknown, command: Command) => {
      const client = await gatewayClient(command.parent!.opts());
      const job = await Private.resolve(client, id);
      const end = await Private.follow(
        client,
        job.id,
        new AbortController().signal
      );
      process.exitCode = end?.state === 'succeeded' ? 0 : EXIT_FAILED;
    });
  jobs
    .command('cancel')
    .description('Cancel a job (or forget one that is over)')
    .argument('<id>', 'the job id (or its first characters)')
    .action(async (id: string, _options: unknown, command: Command) => {
      const client = await gatewayClient(command.parent!.opts());
      const job = await client.cancel((await Private.resolve(client, id)).id);
      process.stdout.write(`${job.id} ${job.state}\n`);
    });
  return jobs;
}

/**
 * A parameter's value from the command line, as papermill reads `-p`: `True`, `False`, `None`,
 * integers and floats as such, JSON lists and objects as such, anything else a string.
 */
export function parseParameterValue(text: string): unknown {
  switch (text) {
    case 'True':
      return true;
    case 'False':
      return false;
    case 'None':
      return null;
  }
  if (
    /^[+-]?\d+$/.test(text) ||
    /^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$/.test(text)
  ) {
    return Number(text);
  }
  if (/^\s*[[{]/.test(text)) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

namespace Private {
  export interface IRunFlags extends IGatewayFlags {
    accelerator?: string;
    parameter: string[];
    kernel?: string;
    output?: string;
    timeout?: number;
    detach?: boolean;
    at?: string;
    simulate?: string;
    discover: boolean;
  }

  export async function run(file: string, flags: IRunFlags): Promise<number> {
    let notebook: unknown;
    try {
      notebook = JSON.parse(await fs.readFile(file, 'utf8'));
    } catch (error) {
      process.stderr.write(
        `ferry run: cannot read ${file}: ${(error as Error).message}\n`
      );
      return EXIT_REFUSED;
    }
    const parameters: Record<string, unknown> = {};
    for (const parameter of flags.parameter) {
      const equals = parameter.indexOf('=');
      if (equals <= 0) {
        process.stderr.write(
          `ferry run: -p takes name=value, not ${JSON.stringify(parameter)}\n`
        );
        return EXIT_REFUSED;
      }
      parameters[parameter.slice(0, equals)] = parseParameterValue(
        parameter.slice(equals + 1)
      );
    }
    let startAt: Date | undefined;
    if (flags.at !== undefined) {
      try {
        startAt = parseStartTime(flags.at);
      } catch (error) {
        if (!(error instanceof StartTimeError)) {
          throw error;
        }
        process.stderr.write(`ferry run: --at: ${error.message}\n`);
        return EXIT_REFUSED;
      }
    }
    for (const flag of ['detach', 'at'] as const) {
      if (flags[flag] !== undefined && !flags.gateway) {
        process.stderr.write(
          `ferry run: --${flag} needs --gateway: a job on the gateway this command starts ends with it\n`
        );
        return EXIT_REFUSED;
      }
    }
    const embedded = flags.gateway ? undefined : await startEmbedded(flags);
    try {
      const client = embedded?.client ?? (await gatewayClient(flags));
      let job: IJob;
      try {
        job = await client.submit({
          notebook: notebook as Record<string, unknown>,
          name: path.basename(file),
          ...(flags.accelerator ? { accelerator: flags.accelerator } : {}),
          ...(flags.kernel ? { kernel_name: flags.kernel } : {}),
          ...(flags.timeout !== undefined ? { timeout: flags.timeout } : {}),
          ...(startAt ? { start_at: startAt.toISOString() } : {}),
          parameters
        });
      } catch (error) {
        process.stderr.write(`ferry run: ${(error as Error).message}\n`);
        return error instanceof JobClientError ? EXIT_REFUSED : EXIT_FAILED;
      }
      if (startAt) {
        scheduled(job, flags.gateway!);
        return 0;
      }
      if (flags.detach) {
        process.stdout.write(`${job.id}\n`);
        return 0;
      }
      process.stderr.write(`job ${job.id} (${job.accelerator})\n`);
      const abort = new AbortController();
      let cancelled = false;
      const onInterrupt = () => {
        if (cancelled) {
          process.exit(EXIT_CANCELLED);
        }
        cancelled = true;
        process.stderr.write('\ncancelling the job...\n');
        void client.cancel(job.id).catch(() => undefined);
      };
      process.on('SIGINT', onInterrupt);
      let end: IJob | undefined;
      try {
        end = await follow(client, job.id, abort.signal);
      } catch (error) {
        process.stderr.write(
          `ferry run: lost the job's event stream (${(error as Error).message}); the job goes on: ferry jobs logs ${job.id}\n`
        );
        return EXIT_FAILED;
      } finally {
        process.off('SIGINT', onInterrupt);
      }
      if (end?.has_notebook) {
        const output =
          flags.output ?? file.replace(/(\.ipynb)?$/i, '.executed.ipynb');
        await fs.writeFile(output, await client.notebook(job.id));
        process.stderr.write(`executed notebook: ${output}\n`);
      }
      if (cancelled) {
        return EXIT_CANCELLED;
      }
      return end?.state === 'succeeded' ? 0 : EXIT_FAILED;
    } finally {
      await embedded?.close();
    }
  }

  /**
   * Say when a job submitted with `--at` starts and how to reach it: its id alone on stdout (for
   * scripts), the rest on stderr. Its log is not followed: nothing runs before its time.
   */
  function scheduled(job: IJob, gateway: string): void {
    const short = job.id.slice(0, 8);
    const where = ` --gateway ${gateway}`;
    const at = Date.parse(job.start_at ?? '');
    process.stdout.write(`${job.id}\n`);
    process.stderr.write(
      (job.state === 'scheduled' && !Number.isNaN(at)
        ? `job ${short} scheduled for ${formatStartTime(new Date(at))} (in ${formatDuration(at - Date.now())}), on ${job.accelerator}\n` +
          'Not following its log: a scheduled job shows nothing until it starts. It holds no device until then, and waits through a gateway restart.\n'
        : `job ${short} is ${job.state} already (its time came)\n`) +
        `  follow it:  ferry jobs logs ${short}${where}\n` +
        `  cancel it:  ferry jobs cancel ${short}${where}\n` +
        `  list jobs:  ferry jobs${where}   (or the Jobs panel of the lab)\n`
    );
  }

  /** A gateway in this process, on a free loopback port, with a temporary root and store. */
  async function startEmbedded(
    flags: IRunFlags
  ): Promise<{ client: JobsClient; close: () => Promise<void> }> {
    const logger = createLogger(process.env.FERRY_LOG_LEVEL ?? 'warn');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ferry-run-'));
    const worker = await createHostWorker({
      logger,
      simulate: flags.simulate,
      discover: flags.discover
    });
    const token = TokenIdentityResolver.generate();
    const gateway = createGateway({
      logger,
      version: VERSION,
      workers: [worker],
      token,
      rootDir: dir,
      stateDir: path.join(dir, 'state')
    });
    const address = await gateway.listen(0, '127.0.0.1');
    return {
      client: new JobsClient({
        url: `http://127.0.0.1:${address.port}`,
        token
      }),
      close: async () => {
        // Its worker goes with it.
        await gateway.close();
        rmSync(dir, { recursive: true, force: true });
      }
    };
  }

  /** A job by its id or the first characters of it. */
  export async function resolve(client: JobsClient, id: string): Promise<IJob> {
    const matches = (await client.list()).filter(j => j.id.startsWith(id));
    if (matches.length !== 1) {
      throw new Error(
        matches.length === 0
          ? `no job ${id}`
          : `${id} names ${matches.length} jobs: give more of the id`
      );
    }
    return matches[0];
  }

  /**
   * Show a job as it goes: a progress line on stderr (redrawn in place on a terminal), its output
   * on stdout. Resolves with the job as it ended (undefined when the stream broke off).
   */
  export async function follow(
    client: JobsClient,
    id: string,
    signal: AbortSignal
  ): Promise<IJob | undefined> {
    const progress = new Progress(process.stderr);
    let end: IJob | undefined;
    for await (const event of client.follow(id, signal)) {
      show(event, progress);
      if (event.type === 'end') {
        end = event.job;
      }
    }
    progress.done();
    if (end) {
      const how =
        end.state === 'succeeded'
          ? `succeeded in ${(end.duration ?? 0).toFixed(1)} s`
          : `${end.state}${end.reason ? `: ${end.reason}` : ''}`;
      process.stderr.write(`job ${end.id} ${how}\n`);
    }
    return end;
  }

  function show(event: JobClientEvent, progress: Progress): void {
    switch (event.type) {
      case 'state':
        progress.state(event.job);
        return;
      case 'cell':
        progress.cell(event.data.cell, event.data.cells);
        return;
      case 'output':
        progress.clear();
        process.stdout.write(outputText(event.data.output));
        progress.redraw();
        return;
      case 'end':
        return;
    }
  }

  /** What a terminal shows of an nbformat output. */
  export function outputText(output: Record<string, unknown>): string {
    const text = (value: unknown) =>
      Array.isArray(value) ? value.join('') : String(value ?? '');
    switch (output.output_type) {
      case 'stream':
        return text(output.text);
      case 'error':
        return `${text((output.traceback as string[] | undefined)?.join('\n'))}\n`;
      default: {
        const data = (output.data ?? {}) as Record<string, unknown>;
        const plain = data['text/plain'];
        return plain === undefined
          ? `[${Object.keys(data).join(', ')}]\n`
          : `${text(plain)}\n`;
      }
    }
  }

  /** ` (Sat 28 Nov 2026, 18:00 UTC)` for a scheduled job, else nothing. */
  function scheduledFor(job: IJob): string {
    const at = Date.parse(job.start_at ?? '');
    return job.state === 'scheduled' && !Number.isNaN(at)
      ? ` (${formatStartTime(new Date(at))})`
      : '';
  }

  /** A table of jobs for a terminal. */
  export function table(jobs: IJob[]): string {
    const rows = [
      ['ID', 'STATE', 'NAME', 'ACCELERATOR', 'CELL', 'DURATION', 'CREATED'],
      ...jobs.map(j => [
        j.id.slice(0, 8),
        j.state + (j.position ? ` (#${j.position})` : '') + scheduledFor(j),
        j.name,
        j.accelerator,
        `${j.cell ?? 0}/${j.cells ?? 0}`,
        j.duration === undefined ? '' : `${j.duration.toFixed(1)}s`,
        j.created
      ])
    ];
    return textTable(rows);
  }

  /** The progress line: state, a bar of cells done, the current cell. */
  class Progress {
    constructor(stream: NodeJS.WriteStream) {
      this._stream = stream;
      this._tty = stream.isTTY === true;
    }

    state(job: IJob): void {
      this._state =
        job.state +
        (job.position ? ` (queue position ${job.position})` : '') +
        scheduledFor(job);
      this._cells = job.cells ?? this._cells;
      this._cell = job.cell ?? this._cell;
      if (!this._tty && job.state !== this._lastState) {
        this._stream.write(`[${this._state}]\n`);
      }
      this._lastState = job.state;
      this.redraw();
    }

    cell(cell: number, cells: number): void {
      this._cell = cell;
      this._cells = cells;
      if (!this._tty) {
        this._stream.write(`[cell ${cell}/${cells}]\n`);
      }
      this.redraw();
    }

    redraw(): void {
      if (!this._tty) {
        return;
      }
      const width = 24;
      const done =
        this._cells > 0
          ? Math.round((width * Math.max(0, this._cell - 1)) / this._cells)
          : 0;
      const bar = '#'.repeat(done) + '-'.repeat(width - done);
      this._stream.write(
        `\r\x1b[2K[${bar}] cell ${this._cell}/${this._cells} ${this._state}`
      );
      this._shown = true;
    }

    clear(): void {
      if (this._tty && this._shown) {
        this._stream.write('\r\x1b[2K');
        this._shown = false;
      }
    }

    done(): void {
      this.clear();
    }

    private _stream: NodeJS.WriteStream;
    private _tty: boolean;
    private _state = '';
    private _lastState = '';
    private _cell = 0;
    private _cells = 0;
    private _shown = false;
  }
}
