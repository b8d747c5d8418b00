/**
 * Variables of the worker's own environment that kernels inherit. Everything else in the worker's
 * environment (tokens, cloud credentials, the gateway's own settings) stays out of kernels. (The
 * interpreter environments a kernel can run in are `environments.ts`.)
 */
export const INHERITED_ENV: readonly string[] = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
  'TERM',
  'PYTHONPATH',
  'VIRTUAL_ENV',
  'CONDA_PREFIX',
  'CONDA_DEFAULT_ENV',
  'LD_LIBRARY_PATH',
  'CUDA_HOME',
  'XDG_DATA_HOME',
  'XDG_CACHE_HOME',
  'XDG_RUNTIME_DIR',
  'JUPYTER_PATH',
  'JUPYTER_DATA_DIR',
  'JUPYTER_RUNTIME_DIR',
  'JUPYTER_CONFIG_DIR',
  'IPYTHONDIR',
  'MPLCONFIGDIR',
  'MPLBACKEND',
  // A worker in a Slurm job: the kernel may name its job (scontrol, sstat).
  'SLURM_JOB_ID'
];

/**
 * The environment of a kernel process: inherited variables and `LC_*`, then the kernelspec's `env`,
 * then the client's (already filtered) variables.
 */
export function kernelEnvironment(
  workerEnv: NodeJS.ProcessEnv,
  inherit: readonly string[],
  specEnv: Record<string, string>,
  requestEnv: Record<string, string>
): Record<string, string> {
  const env: Record<string, string> = {};
  const allowed = new Set(inherit);
  for (const [name, value] of Object.entries(workerEnv)) {
    if (value !== undefined && (allowed.has(name) || name.startsWith('LC_'))) {
      env[name] = value;
    }
  }
  return { ...env, ...specEnv, ...requestEnv };
}
