/** Raised for a client-supplied variable Ferry will not pass to a kernel. */
export class KernelEnvError extends Error {}

/** The longest value a client may set for a kernel variable (Enterprise Gateway's limit). */
export const MAX_ENV_VALUE_LENGTH = 4096;

/**
 * Keep the client-supplied variables a kernel may see: `KERNEL_*` and the names in `allow`. Others
 * (jupyter_server sends its whole environment, secrets included) are dropped without a word.
 *
 * @throws KernelEnvError for a kept variable whose value is too long or holds a NUL character.
 */
export function filterKernelEnv(
  env: Record<string, string> | undefined,
  allow: readonly string[]
): Record<string, string> {
  const kept: Record<string, string> = {};
  const allowed = new Set(allow);
  for (const [name, value] of Object.entries(env ?? {})) {
    if (!name.startsWith('KERNEL_') && !allowed.has(name)) {
      continue;
    }
    if (value.length > MAX_ENV_VALUE_LENGTH) {
      throw new KernelEnvError(
        `env.${name} is longer than ${MAX_ENV_VALUE_LENGTH} characters`
      );
    }
    if (value.includes('\0')) {
      throw new KernelEnvError(`env.${name} contains a NUL character`);
    }
    kept[name] = value;
  }
  return kept;
}
