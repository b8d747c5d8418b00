/**
 * Who a user's kernels, terminals and jobs run as: their account's uid and gid, in their folder
 * (HOME, and the working directory when none is asked for), USER and LOGNAME their folder's name.
 * The gateway puts it in each start it sends a worker; the worker checks it again before running
 * anything as it (agent/kernels/run-as.ts).
 */
import type { IRunAs } from '../protocol';
import type { UserAccounts } from './accounts';

/**
 * The run-as of the user `owner` (an account id); undefined for the token's owner, a share link's
 * holder acting for no account, or an account removed since: those run as the worker's kernel user.
 */
export function runAsOf(
  accounts: UserAccounts,
  owner: string | undefined
): IRunAs | undefined {
  const account = owner === undefined ? undefined : accounts.get(owner);
  return account
    ? {
        uid: account.ids.uid,
        gid: account.ids.gid,
        user: account.folder,
        home: accounts.folderOf(account)
      }
    : undefined;
}
