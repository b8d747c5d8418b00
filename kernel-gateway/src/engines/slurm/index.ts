/**
 * The Slurm engine: a `ferry worker` per kernel as a Slurm job, through the CLI (sbatch, squeue,
 * scancel) or slurmrestd, and the check that the job's user can reach the worker command.
 *
 * @packageDocumentation
 */
export * from './access';
export * from './engine';
export * from './rest';
