import { execFile } from 'node:child_process';
import type { IDevice, IDeviceSample } from '../../protocol/devices';

/**
 * One place devices come from (nvidia-smi, rocm-smi, the PCI bus, a `--simulate` spec): it finds its
 * devices once and samples them on demand.
 */
export interface IDeviceSource {
  /** A short name for logs and notes: `nvidia`, `rocm`, `tpu`, `simulated`. */
  readonly name: string;

  /**
   * The devices this source sees now. Rejects with {@link DeviceToolMissingError} (or an `ENOENT`
   * error) when the tool or interface it reads does not exist on this host.
   */
  discover(): Promise<IDevice[]>;

  /** One sample of each of `devices` (devices this source discovered), in the same order. */
  sample(devices: readonly IDevice[]): Promise<IDeviceSample[]>;

  /**
   * The device files through which each of `devices` is reached (`/dev/nvidia1`), by device id: a
   * kernel that does not hold a device is denied them where the host can (a devices cgroup). A
   * device missing from the answer has none known. Absent: no device of this source has one.
   */
  files?(devices: readonly IDevice[]): Promise<Record<string, string[]>>;

  /** Release what the source holds open (channels, handles). */
  dispose?(): void;
}

/** The command-line tool a device source runs is not installed on this host. */
export class DeviceToolMissingError extends Error {
  constructor(readonly command: string) {
    super(`${command} is not installed`);
    this.name = 'DeviceToolMissingError';
  }

  /** Node's error code, so callers can test for a missing tool one way. */
  readonly code = 'ENOENT';
}

/** A device tool ran but failed (exit status, signal, timeout). */
export class DeviceToolError extends Error {
  constructor(
    readonly command: string,
    message: string,
    /** What the tool printed before failing (rocm-smi prints its JSON, then exits non-zero). */
    readonly stdout = ''
  ) {
    super(`${command} failed: ${message}`);
    this.name = 'DeviceToolError';
  }
}

/** Whether `error` says that a device tool or interface is absent from this host. */
export function isDeviceToolMissing(error: unknown): boolean {
  return (
    error instanceof DeviceToolMissingError ||
    (error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT'
  );
}

/**
 * Run a device tool and return its standard output.
 *
 * @param command - the executable (a name looked up on `PATH`, or a path)
 * @param args - its arguments, passed without a shell
 * @param timeoutMs - how long it may run
 *
 * @throws {@link DeviceToolMissingError} when the executable does not exist;
 *   {@link DeviceToolError} when it exits non-zero, is killed or times out.
 */
export function runDeviceTool(
  command: string,
  args: readonly string[],
  timeoutMs = Private.TOOL_TIMEOUT_MS
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      {
        timeout: timeoutMs,
        maxBuffer: Private.MAX_OUTPUT_BYTES,
        encoding: 'utf8',
        windowsHide: true
      },
      (error, stdout, stderr) => {
        if (!error) {
          resolve(stdout);
          return;
        }
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
          reject(new DeviceToolMissingError(command));
          return;
        }
        // nvidia-smi and rocm-smi explain themselves on stdout as often as on stderr.
        const said = (stderr || stdout).trim().split('\n')[0] ?? '';
        const how = error.killed
          ? `timed out after ${timeoutMs} ms`
          : `exit status ${String(error.code)}`;
        reject(
          new DeviceToolError(command, said ? `${how}: ${said}` : how, stdout)
        );
      }
    );
  });
}

/**
 * A number a device tool printed, or `undefined` when it printed none: `[N/A]`, `N/A`,
 * `[Not Supported]`, `[Unknown Error]`, an empty field ... are unknown, never 0.
 */
export function readMeasurement(value: unknown): number | undefined {
  if (typeof value === 'number') {
    return Number.isFinite(value) ? value : undefined;
  }
  if (typeof value !== 'string') {
    return undefined;
  }
  const text = value.trim();
  if (!Private.NUMBER.test(text)) {
    return undefined;
  }
  const number = Number(text);
  return Number.isFinite(number) ? number : undefined;
}

/**
 * `value` with its `undefined` properties removed, so that an unknown measurement is absent from a
 * sample (and from its JSON) rather than present as `undefined`.
 */
export function omitUndefined<T extends object>(value: T): T {
  for (const key of Object.keys(value) as (keyof T)[]) {
    if (value[key] === undefined) {
      delete value[key];
    }
  }
  return value;
}

/** Bytes in one mebibyte (nvidia-smi reports memory in MiB). */
export const MIB = 1024 * 1024;

/** Bytes in one gibibyte. */
export const GIB = 1024 * MIB;

namespace Private {
  /** nvidia-smi can take seconds on a busy host with many GPUs; more than this is a hang. */
  export const TOOL_TIMEOUT_MS = 15_000;

  export const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

  /** A plain decimal number, as the tools print them (`81559`, `69.94`, `-1`, `35.0`). */
  export const NUMBER = /^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;
}
