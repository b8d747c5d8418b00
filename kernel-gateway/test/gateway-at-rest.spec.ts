/**
 * What a gateway holds at rest: a real `ferry gateway` process loads no package that only another
 * `ferry` command or readable terminal logs need. Each stays in memory for the life of the process:
 * chrono-node (`ferry run --at`) with its locales is ~270 modules and ~13 MiB of RSS, pino-pretty
 * ~30 modules and ~1 MiB; a gateway whose log goes to a service's journal as JSON uses neither.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { startGatewayProcess } from './gateway-process';

const PRELOAD = path.join(__dirname, 'fixtures', 'loaded-packages.cjs');

describe('a gateway at rest', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ferry-at-rest-'));

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("loads neither `ferry run --at`'s date parser nor the readable log's printer", async () => {
    const out = path.join(dir, 'packages.txt');
    const gw = await startGatewayProcess(['--log-format', 'json'], {
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${PRELOAD}`,
      FERRY_TEST_LOADED_PACKAGES: out
    });
    try {
      expect((await gw.api('GET', '/api/status')).status).toBe(200);
    } finally {
      await gw.stop();
    }
    const loaded = readFileSync(out, 'utf8').split('\n');
    // The list is the gateway's own: what it serves with is in it.
    expect(loaded).toEqual(
      expect.arrayContaining(['express', 'lmdb', 'ws', 'zeromq'])
    );
    expect(loaded).not.toContain('chrono-node');
    expect(loaded).not.toContain('pino-pretty');
  }, 60_000);
});
