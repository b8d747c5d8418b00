/**
 * The state directory under stress, with real gateway processes: a full state disk degrades (edits
 * refused with 1013, kernels and reads served, REST saves answered 507) and recovers when space
 * frees; and a second gateway on a state directory in use is refused with the holder named, while
 * one whose holder was killed starts.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import * as path from 'node:path';
import type * as Y from 'yjs';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { KernelSocket, pollUntil, processAlive, startKernel } from './helpers';
import { cellSource, notebook, RawRoomClient } from './yjs-clients';

/**
 * Whether this process may mount a tmpfs (root, with the right to mount): where it may not, the
 * full-disk test is skipped, and its name says why.
 */
function canMountTmpfs(): boolean {
  if (process.getuid?.() !== 0) {
    return false;
  }
  const probe = mkdtempSync(path.join(tmpdir(), 'ferry-mount-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe], {
      stdio: 'ignore'
    });
    execFileSync('umount', [probe], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

const asRoot = canMountTmpfs();

describe('the state directory', () => {
  let dir: string;
  const gateways: IGatewayProcess[] = [];

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-state-dir-'));
    // Kernels run in the root directory as another user (nobody) when the tests run as root.
    chmodSync(dir, 0o711);
  });

  afterEach(async () => {
    await Promise.all(gateways.splice(0).map(g => g.stop()));
    try {
      execFileSync('umount', [path.join(dir, 'disk')], { stdio: 'ignore' });
    } catch {
      // Not mounted (the lock test, or a run that is not root's).
    }
    rmSync(dir, { recursive: true, force: true });
  });

  async function gateway(args: string[]): Promise<IGatewayProcess> {
    const started = await startGatewayProcess(args);
    gateways.push(started);
    return started;
  }

  (asRoot ? it : it.skip)(
    'a full state disk refuses edits with 1013, serves kernels and reads, answers saves 507, and recovers when space frees (skipped unless this process may mount a tmpfs: root)',
    async () => {
      const disk = path.join(dir, 'disk');
      mkdirSync(disk);
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=30m', 'tmpfs', disk]);
      const rootDir = path.join(disk, 'root');
      mkdirSync(rootDir, { mode: 0o777 });
      chmodSync(rootDir, 0o777);
      // Room to free later: the disk recovers when this goes.
      const ballast = path.join(disk, 'ballast');
      writeFileSync(ballast, Buffer.alloc(8 * 2 ** 20, 1));
      writeFileSync(path.join(rootDir, 'big.ipynb'), notebook(['x = 1']));
      const gw = await gateway([
        '--root-dir',
        rootDir,
        '--state-dir',
        path.join(disk, 'state')
      ]);
      const opened = await gw.api(
        'PUT',
        '/api/collaboration/session/big.ipynb',
        { format: 'json', type: 'notebook' }
      );
      expect(opened.status).toBeLessThan(300);
      const { fileId, sessionId } = opened.body as {
        fileId: string;
        sessionId: string;
      };
      const room = `json:notebook:${fileId}`;
      const join = async () => {
        const client = await RawRoomClient.connect(gw.url, room, {
          token: gw.token,
          sessionId
        });
        await client.sync();
        return client;
      };
      const owner = await join();
      const reader = await join();
      const blobOf = (doc: Y.Doc) =>
        (
          (doc.getArray('cells').get(0) as Y.Map<unknown>).get(
            'metadata'
          ) as Y.Map<unknown>
        ).get('blob');

      // 1 MiB of cell metadata at a time, each once the reader has the one before, until the
      // owner is refused (30 MiB hold 20 at most).
      let refused: { code: number; reason: string } | undefined;
      void owner.closed.then(closed => (refused = closed));
      let lastReceived: unknown;
      for (let i = 0; i < 40 && !refused; i++) {
        const blob = randomBytes(2 ** 19).toString('hex');
        const received = new Promise<void>(resolve => {
          const check = () => {
            if (blobOf(reader.doc) === blob) {
              reader.doc.off('update', check);
              resolve();
            }
          };
          reader.doc.on('update', check);
        });
        owner.change(doc =>
          (
            (doc.getArray('cells').get(0) as Y.Map<unknown>).get(
              'metadata'
            ) as Y.Map<unknown>
          ).set('blob', blob)
        );
        await Promise.race([received, owner.closed]);
        if (!refused) {
          lastReceived = blob;
        }
      }
      expect(refused).toEqual({
        code: 1013,
        reason:
          "The gateway's state disk is full: edits are refused until space frees"
      });
      expect(gw.running()).toBe(true);
      // The reader stays; what it has is what was stored.
      expect(reader.ws.readyState).toBe(reader.ws.OPEN);
      expect(blobOf(reader.doc)).toBe(lastReceived);

      // Reads work; kernels start and run.
      const read = await gw.api('GET', '/api/contents/big.ipynb');
      expect(read.status).toBe(200);
      const kernel = await startKernel(gw);
      const socket = await KernelSocket.connect(gw, kernel);
      expect((await socket.execute('print(6 * 7)')).stdout).toBe('42\n');
      socket.close();

      // A save through REST that the disk cannot hold: 507 with a reason.
      const saved = await gw.api('PUT', '/api/contents/filler.txt', {
        type: 'file',
        format: 'text',
        content: 'y'.repeat(4 * 2 ** 20)
      });
      expect(saved.status).toBe(507);
      expect(saved.body).toEqual({
        reason: 'Insufficient Storage',
        message: expect.stringMatching(/No space left on the device/)
      });

      // A client that only syncs is served; its first edit is refused.
      const again = await join();
      const refusedAgain = again.closed;
      again.change(doc => cellSource(doc, 0).insert(0, '# while full\n'));
      expect((await refusedAgain).code).toBe(1013);

      // Space frees: what was kept in memory is stored and relayed, and edits are taken again.
      rmSync(ballast);
      await pollUntil(
        async () => gw.stderr(),
        log => log.includes('a room stores its updates again'),
        20_000,
        100
      );
      const later = await join();
      const relayed = new Promise<void>(resolve => {
        const check = () => {
          if (
            (reader.doc.getArray('cells').get(0) as Y.Map<unknown>)
              .get('source')
              ?.toString()
              .startsWith('# after\n')
          ) {
            resolve();
          }
        };
        reader.doc.on('update', check);
      });
      later.change(doc => cellSource(doc, 0).insert(0, '# after\n'));
      await relayed;
      // Logged once for the whole episode, not once per refused message.
      const log = gw.stderr();
      expect(log.split('a room refuses edits').length - 1).toBe(1);
      expect(gw.running()).toBe(true);
      for (const client of [owner, reader, again, later]) {
        client.close();
      }
    },
    240_000
  );

  it('is one gateway’s: a second is refused with the holder named, and starts once the holder is killed', async () => {
    const stateDir = path.join(dir, 'state');
    const first = await gateway(['--state-dir', stateDir]);
    // Where each gateway's embedded worker keeps its cgroups (ferry-<pid>-<n>), when in force.
    const { process_limits: limits } = (await first.api('GET', '/api/status'))
      .body as { process_limits?: { cgroup?: string } };
    const cgroups = limits?.cgroup ? path.dirname(limits.cgroup) : undefined;
    const refused = await startGatewayProcess(['--state-dir', stateDir]).then(
      second => {
        gateways.push(second);
        return undefined;
      },
      (error: Error) => error.message
    );
    expect(refused).toMatch(/^ferry exited with 1: /);
    expect(refused).toContain(
      `ferry: the state directory ${stateDir} is in use by another gateway ` +
        `(pid ${first.child.pid} on host ${hostname()}, started `
    );
    expect(refused).toContain(
      `, root dir ${first.rootDir}): a state directory serves one gateway at a time`
    );
    expect(first.running()).toBe(true);
    // The refused gateway's embedded worker left no cgroup behind (only live gateways' remain).
    if (cgroups) {
      const orphans = readdirSync(cgroups)
        .map(name => /^ferry-(\d+)-/.exec(name))
        .filter(match => match !== null && !processAlive(Number(match[1])));
      expect(orphans.map(match => match![0])).toEqual([]);
    }

    // kill -9 leaves the lock file behind, and no lock: the next gateway takes the directory.
    first.child.kill('SIGKILL');
    await first.exited;
    const next = await gateway(['--state-dir', stateDir]);
    expect((await next.api('GET', '/api/status')).status).toBe(200);
    expect(next.stderr()).toContain(
      'the state directory was left by a gateway that is gone: taken over'
    );
  }, 120_000);
});
