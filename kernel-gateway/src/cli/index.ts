/**
 * The `ferry` command line: `ferry gateway` (cli/gateway.ts) and `ferry worker` (cli/worker.ts),
 * `ferry run` and `ferry jobs` (cli/run.ts), `ferry kernels` (cli/kernels.ts),
 * their options written once in tables (options/) and declared from them (cli/options.ts).
 * `bin/ferry.js` runs it.
 */
import { Command } from 'commander';
import { gatewayCommand } from './gateway';
import { kernelsCommand } from './kernels';
import { jobsCommand, runCommand } from './run';
import { VERSION } from './version';
import { workerCommand } from './worker';

export { VERSION } from './version';
export {
  JobClientError,
  JobsClient,
  type IJob,
  type JobClientEvent
} from './jobs-client';
export { parseParameterValue } from './run';

/** The `ferry` command line. */
export function createProgram(): Command {
  return new Command('ferry')
    .description(
      'Ferry: a Jupyter kernel gateway that puts each kernel on the accelerator its user picked'
    )
    .version(VERSION)
    .addCommand(gatewayCommand())
    .addCommand(workerCommand())
    .addCommand(runCommand())
    .addCommand(jobsCommand())
    .addCommand(kernelsCommand());
}
