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
  notes: 'logs on standard error; tokens are never logged'
} as const satisfies IOptionSpec;

/** `--log-format`. */
export const LOG_FORMAT = {
  flag: '--log-format <format>',
  help: 'how log lines look: pretty (readable lines), json (one JSON object a line), auto (pretty on a terminal, else json)',
  choices: ['auto', 'pretty', 'json'],
  env: 'FERRY_LOG_FORMAT',
  defaultText: 'auto',
  notes:
    'pretty when standard error is a terminal; JSON into files and pipes (log collectors read it)'
} as const satisfies IOptionSpec;
