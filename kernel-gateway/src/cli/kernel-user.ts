/**
 * Which user kernels run as (`--kernel-user`), for both commands that run kernels, said once at
 * start-up with what kernel code can then reach.
 */
import type { Logger } from 'pino';
import { KernelUser } from '../agent';

/**
 * The user kernels run as: `--kernel-user`, else nobody when this process is root, else this
 * process's user (undefined), said once at start-up with what kernel code can then reach.
 *
 * @throws Error for an unknown user, or another user when this process is not root.
 */
export function chooseKernelUser(
  flag: string | undefined,
  logger: Logger
): KernelUser | undefined {
  const uid = process.getuid?.();
  const user =
    flag !== undefined
      ? KernelUser.resolve(flag)
      : uid === 0
        ? KernelUser.resolve('nobody')
        : undefined;
  user?.assertSwitchable();
  if (user && !user.isSelf) {
    logger.info(
      { kernelUser: user.description },
      `kernels run as ${user.description}: kernel code cannot read this process's memory, environment or tokens`
    );
  } else if (uid === 0) {
    logger.warn(
      'kernels run as root (--kernel-user root): kernel code can read every secret of this host, Ferry tokens included'
    );
  } else {
    logger.info(
      { uid },
      "kernels run as this process's user: kernel code can read whatever this user can, Ferry's memory and start-up environment included (a uid boundary needs Ferry to run as root, with --kernel-user)"
    );
  }
  return user;
}
