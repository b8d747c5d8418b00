/**
 * How a `ferry` command ends: on SIGINT or SIGTERM it stops what it runs, then exits.
 */
import type { Logger } from 'pino';

/**
 * Stop on SIGINT/SIGTERM, then exit 0 (a second signal exits at once, with 1).
 *
 * @param what - What the log says on the first signal.
 */
export function stopOnSignals(
  logger: Logger,
  what: string,
  stop: () => Promise<void>
): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) {
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, what);
    void stop().then(() => process.exit(0));
  };
  process.on('SIGINT', () => handler('SIGINT'));
  process.on('SIGTERM', () => handler('SIGTERM'));
}
