/**
 * The token of one person's job worker: a Slurm job submitted as a signed-in person runs its worker
 * as them, so their kernels (the same uid) can read the worker's environment. It gets this token,
 * not the gateway's worker token: good for that one worker id and that one uid, and nothing else.
 *
 * @packageDocumentation
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** What a job token starts with, so that it never reads as a worker token. */
const PREFIX = 'ferry-job.';

/**
 * The token a job's worker registers with: an HMAC, keyed with the worker token, of its worker id and
 * the uid of the person it runs for.
 *
 * @param workerToken - The gateway's worker token (the key; it never leaves the gateway).
 * @param workerId - The id the job's worker registers with (`job-<kernel id>`).
 * @param ownerUid - The uid of the person the job runs as.
 */
export function jobWorkerToken(
  workerToken: string,
  workerId: string,
  ownerUid: number
): string {
  const mac = createHmac('sha256', workerToken)
    .update(`ferry job worker\0${workerId}\0${ownerUid}`)
    .digest('base64url');
  return `${PREFIX}${mac}`;
}

/** Whether `presented` is the job token of `workerId` for `ownerUid` (compared in constant time). */
export function isJobWorkerToken(
  presented: string,
  workerToken: string,
  workerId: string,
  ownerUid: number | undefined
): boolean {
  if (
    !presented.startsWith(PREFIX) ||
    !workerId ||
    !Number.isSafeInteger(ownerUid) ||
    (ownerUid as number) <= 0
  ) {
    return false;
  }
  const expected = Buffer.from(
    jobWorkerToken(workerToken, workerId, ownerUid as number)
  );
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
