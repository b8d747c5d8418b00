import { promises as fs } from 'node:fs';
import { createInterface } from 'node:readline';

/**
 * The environment variables that hold Ferry's secrets: the gateway's token, the worker token,
 * slurmrestd's token and a JupyterHub service's API token. {@link takeSecretEnv} removes them from the environment the moment Ferry
 * starts, so no child (a kernel, an embedded worker's tool, sbatch and its job) inherits them.
 */
export const SECRET_ENV = [
  'FERRY_TOKEN',
  'FERRY_WORKER_TOKEN',
  'SLURM_JWT',
  'JUPYTERHUB_API_TOKEN'
] as const;

/** One of {@link SECRET_ENV}. */
export type SecretEnvName = (typeof SECRET_ENV)[number];

/**
 * Take every {@link SECRET_ENV} variable out of `env` (this process's environment) and return their
 * values.
 *
 * #### Notes
 * What is removed is the live environment that children inherit. The environment this process was
 * started with stays readable in /proc/PID/environ to its own user and root: only a uid boundary
 * (`--kernel-user`) keeps kernel code from it.
 */
export function takeSecretEnv(
  env: NodeJS.ProcessEnv = process.env
): Partial<Record<SecretEnvName, string>> {
  const taken: Partial<Record<SecretEnvName, string>> = {};
  for (const name of SECRET_ENV) {
    const value = env[name];
    delete env[name];
    if (value !== undefined && value !== '') {
      taken[name] = value;
    }
  }
  return taken;
}

/**
 * Why a secret may not be given on the command line, and how to give it instead.
 *
 * @param option - The option given, `--token`.
 * @param envName - The variable that may hold it instead.
 * @param fileOption - The option that reads it from a file.
 */
export function secretOnCommandLine(
  option: string,
  envName: string,
  fileOption: string
): string {
  return (
    `${option} takes no value on the command line, where every user of this host can read it ` +
    `(ps, /proc/PID/cmdline) and kernel code can read it from its parent: set ${envName} in the ` +
    `environment instead, or use ${fileOption} FILE (${fileOption} - reads one line from standard input)`
  );
}

/**
 * Read a token from a file, or one line of standard input for `-`: one line, surrounding
 * whitespace removed.
 *
 * @param file - The file, or `-`.
 * @param what - What the token is, for messages (`--token-file`).
 * @param warn - Told when the file can be read by users other than its owner.
 * @throws Error, never with the token in it, for a file that cannot be read, is empty or holds
 *   more than one line.
 */
export async function readTokenFile(
  file: string,
  what: string,
  warn: (message: string) => void
): Promise<string> {
  let text: string;
  if (file === '-') {
    text = await Private.firstLine();
  } else {
    try {
      const stat = await fs.stat(file);
      if (stat.isFile() && (stat.mode & 0o077) !== 0) {
        warn(
          `${what} ${file} can be read by other users (mode ${(stat.mode & 0o777).toString(8)}): chmod 600 it, or kernels running as another user can read the token`
        );
      }
      text = await fs.readFile(file, 'utf8');
    } catch (error) {
      throw new Error(
        `${what}: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`
      );
    }
  }
  const token = text.trim();
  if (!token) {
    throw new Error(
      `${what}: ${file === '-' ? 'standard input' : file} holds no token`
    );
  }
  if (/[\r\n]/.test(token)) {
    throw new Error(
      `${what}: ${file === '-' ? 'standard input' : file} holds more than one line`
    );
  }
  return token;
}

namespace Private {
  /** The first line of standard input (all of it, without a newline). */
  export function firstLine(): Promise<string> {
    return new Promise((resolve, reject) => {
      const reader = createInterface({ input: process.stdin });
      let done = false;
      const finish = (line: string) => {
        if (!done) {
          done = true;
          reader.close();
          // Nothing more is read: let go of it, so it keeps no process alive.
          process.stdin.destroy();
          resolve(line);
        }
      };
      reader.once('line', finish);
      reader.once('close', () => finish(''));
      process.stdin.once('error', reject);
    });
  }
}
