import { createRequire } from 'node:module';
import pino, { type DestinationStream, type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';

/** How log lines are written: readable lines, JSON lines, or readable only on a terminal. */
export type LogFormat = 'auto' | 'pretty' | 'json';

/** The formats `--log-format` and `FERRY_LOG_FORMAT` take. */
export const LOG_FORMATS: readonly LogFormat[] = ['auto', 'pretty', 'json'];

/**
 * The gateway's structured logger, on standard error. Tokens and authorization headers are
 * redacted wherever they appear. On a terminal (`auto`, the default) each line is readable (time,
 * level, message, then the fields); into a file or a pipe it stays one JSON object per line, for
 * log collectors. `format` (else `FERRY_LOG_FORMAT`) forces either.
 */
export function createLogger(level = 'info', format?: string): Logger {
  const options = {
    level,
    base: { pid: process.pid },
    redact: {
      paths: [
        'token',
        '*.token',
        'authorization',
        '*.authorization',
        '*.headers.authorization'
      ],
      censor: '[redacted]'
    }
  };
  return pino(options, destination(format ?? process.env.FERRY_LOG_FORMAT));
}

/** Where the lines go: standard error, through pino-pretty when they are to be readable. */
function destination(format: string | undefined): DestinationStream {
  const chosen = (LOG_FORMATS as readonly string[]).includes(format ?? '')
    ? (format as LogFormat)
    : 'auto';
  const readable =
    chosen === 'pretty' || (chosen === 'auto' && process.stderr.isTTY === true);
  if (!readable) {
    return pino.destination(2);
  }
  // Loaded only for readable lines: JSON lines (a service, a pipe) need none of its ~30 modules.
  const pretty = createRequire(__filename)('pino-pretty') as typeof PinoPretty;
  return pretty({
    destination: 2,
    // Synchronous, as pino.destination(2) is: the last lines before an exit are not lost.
    sync: true,
    colorize: process.stderr.isTTY === true && !process.env.NO_COLOR,
    translateTime: 'SYS:HH:MM:ss',
    // A line per entry, its fields after the message: a terminal stays readable.
    singleLine: true,
    ignore: 'pid,hostname'
  });
}
