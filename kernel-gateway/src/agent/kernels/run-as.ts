/**
 * A signed-in person's user on a worker (`IRunAs`, carried by a kernel start or a terminal open):
 * checked here, on the worker, whatever the gateway sent, and turned into the {@link KernelUser}
 * their kernel or terminal runs as. Remote workers (root) and those Slurm starts apply it the same
 * way as the embedded one.
 *
 * @packageDocumentation
 */
import { statSync } from 'node:fs';
import * as path from 'node:path';
import { RUN_AS_IDS, type IRunAs } from '../../protocol/worker';
import { KernelUser } from './kernel-user';

/** A run-as a worker refuses, with the reason its start fails with. */
export class RunAsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunAsError';
  }
}

/** The `users` group, which some sites give every person as their primary group. */
const USERS_GID = 100;

/**
 * Check a run-as as a worker gets it: uid and gid of an ordinary account (never root, a system
 * account or `nobody`), a folder name that no shell or path can misread, an absolute home.
 *
 * @throws RunAsError naming what is wrong.
 */
export function checkRunAs(runAs: IRunAs): void {
  const { uid, gid, user, home } = runAs;
  const ordinary = (id: unknown) =>
    Number.isInteger(id) &&
    (id as number) >= RUN_AS_IDS.first &&
    (id as number) <= RUN_AS_IDS.last;
  if (!ordinary(uid)) {
    throw new RunAsError(
      `a user's code never runs as uid ${String(uid)}: only uids ${RUN_AS_IDS.first}-${RUN_AS_IDS.last}`
    );
  }
  if (!ordinary(gid) && gid !== USERS_GID) {
    throw new RunAsError(
      `a user's code never runs with gid ${String(gid)}: only gids ${RUN_AS_IDS.first}-${RUN_AS_IDS.last} or ${USERS_GID}`
    );
  }
  if (typeof user !== 'string' || !/^[a-z][a-z0-9_-]{0,31}$/.test(user)) {
    throw new RunAsError(`not a user name: ${JSON.stringify(user)}`);
  }
  if (
    typeof home !== 'string' ||
    !path.isAbsolute(home) ||
    home.includes('\0') ||
    path.normalize(home) !== home.replace(/(.)\/+$/, '$1')
  ) {
    throw new RunAsError(`not an absolute folder: ${JSON.stringify(home)}`);
  }
}

/**
 * The user a kernel or terminal of `runAs` runs as on this host: checked, and with `runAs.home` as
 * its HOME where that is a folder it owns here (else, as for `--kernel-user`, each kernel gets a
 * private one: a remote host without the users' folders).
 *
 * @throws RunAsError for a run-as {@link checkRunAs} refuses, or one this process cannot switch to.
 */
export function runAsUser(runAs: IRunAs): KernelUser {
  checkRunAs(runAs);
  const account: KernelUser.IAccount = {
    name: runAs.user,
    uid: runAs.uid,
    gid: runAs.gid
  };
  try {
    const stat = statSync(runAs.home);
    if (stat.isDirectory() && stat.uid === runAs.uid) {
      account.home = runAs.home;
    }
  } catch {
    // Not on this host: each kernel gets a home of its own.
  }
  const user = new KernelUser(account);
  const self = process.getuid?.();
  if (!user.isSelf && self !== 0) {
    throw new RunAsError(
      `this worker runs as uid ${self}, not root: it cannot run ${runAs.user}'s code as uid ${runAs.uid} (run the worker as root)`
    );
  }
  return user;
}
