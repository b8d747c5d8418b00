/**
 * The Slurm engine: a `ferry worker` per kernel as a Slurm job, submitted through a Slurm client (the
 * command-line tools or slurmrestd, one interface), and the check that the job's user can reach the
 * worker command.
 *
 * @packageDocumentation
 */
export { jobAccessBlocked, lookUpJobUser } from './access';
export { SlurmProvisioner } from './engine';
