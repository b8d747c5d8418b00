/**
 * A signed-in person as a Slurm job's user: their account as the cluster knows it, and the folder
 * of theirs where their jobs write their output.
 */
import { chmodSync, chownSync, lstatSync, mkdirSync } from 'node:fs';
import * as path from 'node:path';
import type { IRunAs } from '../../protocol';
import { lookUpAccount, lookUpJobUser, type IJobUser } from './access';
import type { ISlurmUser } from './client';

/** A signed-in person a job runs as. */
export interface IJobPerson {
  /** Their account, as Slurm is told it. */
  user: ISlurmUser;
  /** Their uid and groups, as the file system judges them. */
  access: IJobUser;
  /** Their folder: HOME, and where the job starts. */
  home: string;
  /** Its name (their folder under the output directory). */
  folder: string;
}

/**
 * The account a person's job runs as: theirs where this host knows their uid; undefined where it
 * does not and the engine's own jobs run as root (whose worker switches to their uid).
 *
 * @param engineUser - Who the engine's own jobs run as (`root`, a slurmrestd token's user).
 * @param via - How jobs are submitted, for the message (`sbatch`, `slurmrestd at ...`).
 * @throws Error where neither can be.
 */
export function jobPerson(
  runAs: IRunAs,
  engineUser: string,
  via: string
): IJobPerson | undefined {
  const account = lookUpAccount(runAs.uid);
  if (!account) {
    if (engineUser === 'root') {
      return undefined;
    }
    throw new Error(
      `${runAs.user}'s kernels run as uid ${runAs.uid}, which no account of this host has, so no Slurm job can run as them; and the jobs ${via} submits run as ${engineUser}, who cannot switch to their uid: give people accounts the cluster knows (LDAP, sssd), or submit as root`
    );
  }
  const user: ISlurmUser = {
    name: account.name,
    uid: runAs.uid,
    gid: runAs.gid
  };
  return {
    user,
    access: lookUpJobUser(account.name) ?? {
      name: account.name,
      uid: runAs.uid,
      gids: [runAs.gid]
    },
    home: runAs.home,
    folder: runAs.user
  };
}

/**
 * Where a person's job writes its output: a folder of theirs under the output directory (mode
 * 0700, made by the gateway), never a file others read; discarded without an output directory.
 */
export function personOutput(
  outputDir: string | undefined,
  person: IJobPerson
): string {
  if (!outputDir) {
    return '/dev/null';
  }
  const dir = path.join(outputDir, person.folder);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new Error(
        `cannot make ${person.folder}'s job output folder ${dir}: ${(error as Error).message}`
      );
    }
  }
  const stats = lstatSync(dir);
  if (!stats.isDirectory()) {
    throw new Error(
      `${dir}, where ${person.folder}'s Slurm jobs write, is not a folder`
    );
  }
  try {
    chownSync(dir, person.user.uid, person.user.gid);
    chmodSync(dir, 0o700);
  } catch (error) {
    throw new Error(
      `cannot give ${person.folder} their job output folder ${dir} (the gateway must run as root to submit jobs as people): ${(error as Error).message}`
    );
  }
  return `${dir}/ferry-job-%j.log`;
}
