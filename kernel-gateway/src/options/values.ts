/**
 * How option values are read from the command line and turned into settings: each refuses a bad
 * value with commander's `InvalidArgumentError`, which names the option in its message.
 */
import * as path from 'node:path';
import { InvalidArgumentError } from 'commander';
import {
  parseDuration,
  parseIdleReturn,
  parseKernelspecAccelerators,
  parseKernelspecEnvironments
} from '../kernels';
import { parseDuration as parseLongDuration } from '../accounting/durations';
import { parseUidRange, type IUidRange } from '../users/uids';

/** A non-negative number. */
export function number(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0) {
    throw new InvalidArgumentError('expected a non-negative number');
  }
  return parsed;
}

/** A non-negative whole number. */
export function count(value: string): number {
  const parsed = number(value);
  if (!Number.isInteger(parsed)) {
    throw new InvalidArgumentError('expected a whole number');
  }
  return parsed;
}

/** A repeatable option whose values may also be comma-separated. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, ...value.split(',').filter(Boolean)];
}

/** `--kernelspec-accelerators`, parsed. */
export function kernelspecAccelerators(
  value: string
): ReturnType<typeof parseKernelspecAccelerators> {
  try {
    return parseKernelspecAccelerators(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** `--kernelspec-environments`, parsed. */
export function kernelspecEnvironments(
  value: string
): ReturnType<typeof parseKernelspecEnvironments> {
  try {
    return parseKernelspecEnvironments(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** `--idle-return gpu=30m,tpu=20m`, checked (the setting reads it). */
export function idleReturn(value: string): string {
  try {
    parseIdleReturn(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
  return value;
}

/** A duration (`30s`, `5m`, `1h`; a bare number is seconds), checked (the setting reads it). */
export function duration(value: string): string {
  try {
    parseDuration(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
  return value;
}

/** `--usage-retention`: `0` (keep everything) or a duration such as `400d`, `60w`, checked. */
export function retention(value: string): string {
  if (value.trim() !== '0') {
    try {
      parseLongDuration(value);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message);
    }
  }
  return value;
}

/** A checked `--usage-retention` in ms (0: keep everything). */
export function retentionMs(value: string): number {
  return value.trim() === '0' ? 0 : parseLongDuration(value);
}

/** `--user-uids`, parsed. */
export function uidRange(value: string): IUidRange {
  try {
    return parseUidRange(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** Conversions from an option's units to its setting's. */
export namespace Convert {
  /** MiB to bytes. */
  export const mebibytes = (value: number): number => value * 2 ** 20;
  /** Seconds to milliseconds. */
  export const seconds = (value: number): number => value * 1000;
  /** A path, made absolute against the working directory. */
  export const absolute = (value: string): string => path.resolve(value);
  /** A path made absolute, an empty one left as it is. */
  export const absoluteIfGiven = (value: string): string =>
    value && path.resolve(value);
}
