/**
 * A kernel confined to one folder: it runs in a mount namespace of its own where the gateway's
 * root directory shows only that folder (and the kernel's own private directory, when it lies
 * there). Share links that run code ask for it (issue 23): their holders run code in the owner's
 * kernel, and unconfined that kernel reads every file its user can.
 *
 * @packageDocumentation
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';

/** The folder a kernel is confined to, under the root it hides. */
export interface IConfinement {
  /** The directory hidden behind an empty, read-only tmpfs (the gateway's root directory). */
  root: string;
  /** The one folder under `root` that stays, read-write, at its own path (the notebook's). */
  dir: string;
}

/** Whether kernels can be confined here, and why not. */
export interface IConfinementSupport {
  available: boolean;
  /** Why not, for a person; absent when available. */
  reason?: string;
}

const UNSHARE = ['/usr/bin/unshare', '/bin/unshare'];
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'];

/**
 * Runs as root in the new namespace: `$1` the root, then the directories to keep, `--`, the command.
 * Each kept directory is bind-mounted aside, the root is covered with an empty tmpfs, and each is
 * moved back to its own path; the tmpfs then turns read-only, the shell enters the notebook's folder
 * (the old working directory would still reach the hidden tree) and execs the kernel.
 */
const SCRIPT = [
  'set -e',
  'root=$1; shift',
  'n=0; for d in "$@"; do [ "$d" = -- ] && break; n=$((n+1)); s=$(mktemp -d); mount --bind "$d" "$s"; eval "stage$n=\\$s keep$n=\\$d"; done',
  'mount -t tmpfs -o mode=0755,size=1m ferry-confined "$root"',
  'i=1; while [ $i -le $n ]; do eval "s=\\$stage$i d=\\$keep$i"; mkdir -p "$d"; mount --move "$s" "$d"; rmdir "$s"; i=$((i+1)); done',
  'mount -o remount,ro,bind "$root" 2>/dev/null || mount -o remount,ro "$root"',
  'cd "$keep1"',
  'while [ "$1" != -- ]; do shift; done; shift',
  'exec "$@"'
].join('\n');

/**
 * Whether this process can confine kernels: it needs root (CAP_SYS_ADMIN for a mount namespace),
 * `unshare` and `setpriv` (util-linux), and Linux.
 */
export function confinementSupport(): IConfinementSupport {
  if (process.platform !== 'linux') {
    return {
      available: false,
      reason: 'confining a kernel to its folder needs Linux mount namespaces'
    };
  }
  if (process.getuid?.() !== 0) {
    return {
      available: false,
      reason: `confining a kernel to its folder needs a mount namespace, which needs root (CAP_SYS_ADMIN), and the gateway runs as uid ${process.getuid?.()}`
    };
  }
  if (!UNSHARE.some(p => existsSync(p)) || !SETPRIV.some(p => existsSync(p))) {
    return {
      available: false,
      reason:
        'confining a kernel to its folder needs unshare and setpriv (util-linux)'
    };
  }
  return { available: true };
}

/**
 * The command that runs `argv` confined: a private mount namespace (`unshare`) where `root` shows only
 * `confinement.dir` (and `keep`, the kernel's private directory, if it lies under the root), entered
 * as root and left for `runAs` (through `setpriv`) just before the kernel's own code.
 *
 * @throws Error when confinement is not available here, the kernel would run as root, or the
 *   folder is not under the root.
 */
export function confinedCommand(
  argv: string[],
  confinement: IConfinement,
  keep: string[],
  runAs: { uid: number; gid: number } | undefined
): string[] {
  const support = confinementSupport();
  if (!support.available) {
    throw new Error(support.reason);
  }
  if (!runAs || runAs.uid === 0) {
    // Root in the namespace could unmount the tmpfs and see the root directory again.
    throw new Error(
      'a kernel that runs as root could undo its confinement: run kernels as another user (--kernel-user)'
    );
  }
  const root = path.resolve(confinement.root);
  const dir = path.resolve(confinement.dir);
  const under = (p: string) =>
    p === root || p.startsWith(root.endsWith('/') ? root : `${root}/`);
  if (!under(dir)) {
    throw new Error(
      `cannot confine a kernel to ${dir}: it is not under ${root}`
    );
  }
  const unshare = UNSHARE.find(p => existsSync(p))!;
  const setpriv = SETPRIV.find(p => existsSync(p))!;
  const user = [
    setpriv,
    `--reuid=${runAs.uid}`,
    `--regid=${runAs.gid}`,
    '--clear-groups',
    '--'
  ];
  return [
    unshare,
    '--mount',
    '--propagation',
    'private',
    '--',
    '/bin/sh',
    '-c',
    SCRIPT,
    'ferry-confine',
    root,
    dir,
    ...keep.map(p => path.resolve(p)).filter(p => under(p) && p !== dir),
    '--',
    ...user,
    ...argv
  ];
}
