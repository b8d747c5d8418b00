import pino, { type Logger } from 'pino';

/**
 * The gateway's structured logger (JSON lines on stderr). Tokens and authorization headers are
 * redacted wherever they appear.
 */
export function createLogger(level = 'info'): Logger {
  return pino(
    {
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
    },
    pino.destination(2)
  );
}
