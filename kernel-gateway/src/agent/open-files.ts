/**
 * The process's open files: its limit, raised at start-up, and how many kernels that limit carries.
 *
 * Each kernel costs about 19 file descriptors here (its five ZeroMQ sockets, their internal
 * signalling, the process's pipes). Two ceilings stop a worker long before its memory does: the
 * open-files limit (`ulimit -n`, often a soft 1024 under systemd) and ZeroMQ's own socket count
 * (1023 by default: about 200 kernels). Past either, opening a socket throws, and a timer that did
 * so (the heartbeat) took the whole gateway down. So `ferry gateway` and `ferry worker` raise the
 * soft limit to the hard one first ({@link raiseOpenFileLimit}, as jupyter_server's
 * `min_open_files_limit` does), and each worker sets ZeroMQ's socket count to what the limit can
 * carry and refuses a kernel past that capacity, naming the limit ({@link openFilesBudget}).
 *
 * @packageDocumentation
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import * as zmq from 'zeromq';

/** File descriptors one kernel uses, measured (10 kernels: 188 more than none) and rounded up. */
const FDS_PER_KERNEL = 20;

/** ZeroMQ sockets of one kernel: shell, control, stdin, iopub and heartbeat. */
const SOCKETS_PER_KERNEL = 5;

/** Descriptors kept for everything else: HTTP clients, files, terminals, the store, gRPC. */
const RESERVED_FDS = 128;

/** ZeroMQ sockets kept beyond the kernels' (a socket replaced before the old one is reaped). */
const SPARE_SOCKETS = 64;

/** The process's limit on open files (soft and hard), where the system says (Linux: /proc). */
export function openFileLimit(): { soft: number; hard: number } | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find(l => l.startsWith('Max open files'));
    const [soft, hard] = (line ?? '').split(/\s+/).slice(3, 5).map(Number);
    return Number.isFinite(soft) && Number.isFinite(hard)
      ? { soft, hard }
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Raise the soft limit on open files to the hard one, where it is lower (`prlimit` from util-linux;
 * no privilege needed), and log the limit in force. First thing at start-up: the HTTP server sizes
 * its connection caps by it, and the workers their kernel capacity.
 *
 * @returns the soft limit now, if known.
 */
export function raiseOpenFileLimit(logger: Logger): number | undefined {
  let limit = openFileLimit();
  if (limit && limit.soft < limit.hard) {
    try {
      execFileSync(
        'prlimit',
        ['--pid', String(process.pid), `--nofile=${limit.hard}:${limit.hard}`],
        { stdio: 'ignore' }
      );
      limit = openFileLimit() ?? limit;
    } catch {
      // No prlimit: the soft limit stays, and the log says what it is.
    }
  }
  if (limit) {
    logger.info(
      { soft: limit.soft, hard: limit.hard },
      limit.soft < limit.hard
        ? `open files: at most ${limit.soft} (could not raise it to the hard limit, ${limit.hard})`
        : `open files: at most ${limit.soft}`
    );
  } else {
    logger.info('open files: the limit is not known on this system');
  }
  return limit?.soft;
}

/** How many kernels this process can hold, by its open-files limit and ZeroMQ's socket count. */
export interface IOpenFilesBudget {
  /** The most kernels at once. */
  readonly kernelCapacity: number;
  /** Why no more fit, for a refused start: the limit and how to raise it. */
  explain(running: number): string;
}

let budget: IOpenFilesBudget | undefined;

/**
 * This process's budget, set on the first call (after {@link raiseOpenFileLimit} where the command
 * raises it): ZeroMQ's socket count is set to carry that many kernels. Later calls return it.
 */
export function openFilesBudget(logger: Logger): IOpenFilesBudget {
  budget ??= Private.budget(logger);
  return budget;
}

namespace Private {
  export function budget(logger: Logger): IOpenFilesBudget {
    const files = openFileLimit()?.soft;
    const byFiles =
      files === undefined
        ? Number.POSITIVE_INFINITY
        : Math.floor((files - RESERVED_FDS) / FDS_PER_KERNEL);
    const bySockets = Math.floor(
      (zmq.context.maxSocketsLimit - SPARE_SOCKETS) / SOCKETS_PER_KERNEL
    );
    const capacity = Math.max(0, Math.min(byFiles, bySockets));
    zmq.context.maxSockets = Math.min(
      zmq.context.maxSocketsLimit,
      Math.max(
        zmq.context.maxSockets,
        capacity * SOCKETS_PER_KERNEL + SPARE_SOCKETS
      )
    );
    if (files !== undefined && capacity < 64) {
      logger.warn(
        { openFiles: files, kernels: capacity },
        `the open-files limit (${files}) leaves room for ${capacity} kernels: raise it (ulimit -n, or LimitNOFILE= in a systemd unit)`
      );
    }
    return {
      kernelCapacity: capacity,
      explain: running =>
        `this worker holds ${running} kernels, all that its open-files limit ` +
        `(${files ?? 'unknown'}, about ${FDS_PER_KERNEL} per kernel) allows: stop a kernel, ` +
        'or raise the limit (ulimit -n, or LimitNOFILE= in a systemd unit) and restart the worker'
    };
  }
}
