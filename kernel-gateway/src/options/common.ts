/**
 * Options more than one command has, written once.
 */
import type { IOptionSpec } from './table';

/** `--log-level`. */
export const LOG_LEVEL = {
  flag: '--log-level <level>',
  help: 'log level',
  choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'],
  default: 'info',
  notes: 'pino JSON logs on standard error; tokens are never logged'
} as const satisfies IOptionSpec;
