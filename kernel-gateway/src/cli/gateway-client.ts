/**
 * The gateway a client command talks to (`ferry jobs`, `ferry kernels`, `ferry run --gateway`): its
 * `--gateway` and `--token-file` options, a token on the command line refused, and a
 * {@link JobsClient} with the token they name.
 */
import type { Command } from 'commander';
import { readTokenFile, takeSecretEnv } from '../secrets';
import { JobsClient } from './jobs-client';
import { refusedSecret } from './options';

/** The flags that name a gateway and its token. */
export interface IGatewayFlags {
  gateway?: string;
  tokenFile?: string;
}

/** Declare `--gateway` and `--token-file` (and refuse `--token`) on a command that reads a gateway. */
export function gatewayOptions(command: Command): Command {
  return command
    .option(
      '--gateway <url>',
      'the gateway (default: FERRY_GATEWAY_URL, else http://127.0.0.1:8888)'
    )
    .option(
      '--token-file <file>',
      'a file holding the gateway token; else FERRY_TOKEN'
    )
    .addOption(
      refusedSecret(command, '--token', 'FERRY_TOKEN', '--token-file')
    );
}

/** A client of the gateway the flags name, with its token (the file's, else FERRY_TOKEN). */
export async function gatewayClient(flags: IGatewayFlags): Promise<JobsClient> {
  const secrets = takeSecretEnv();
  const token = flags.tokenFile
    ? await readTokenFile(flags.tokenFile, '--token-file', message =>
        process.stderr.write(`${message}\n`)
      )
    : secrets.FERRY_TOKEN;
  return new JobsClient({
    url:
      flags.gateway ?? process.env.FERRY_GATEWAY_URL ?? 'http://127.0.0.1:8888',
    token
  });
}
