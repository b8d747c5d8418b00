import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { apiFor, freePort } from './helpers';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');

/** Start `ferry gateway` and resolve with its printed URL once it says it is ready. */
async function startCli(
  args: string[],
  env: NodeJS.ProcessEnv = {}
): Promise<{ child: ChildProcess; lines: string[]; stderr: () => string }> {
  // A state directory of its own unless the test names one: ~/.ferry/state is one gateway's at a time.
  const stateDir = args.includes('--state-dir')
    ? undefined
    : mkdtempSync(path.join(tmpdir(), 'ferry-cli-state-'));
  const child = spawn(
    process.execPath,
    [
      FERRY,
      'gateway',
      '--port',
      '0',
      ...(stateDir === undefined ? [] : ['--state-dir', stateDir]),
      ...args
    ],
    {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe']
    }
  );
  child.once('exit', () => {
    if (stateDir !== undefined) {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
  let stderr = '';
  child.stderr!.on('data', chunk => (stderr += chunk));
  const lines: string[] = [];
  const reader = createInterface({ input: child.stdout! });
  await new Promise<void>((resolve, reject) => {
    child.once('exit', code =>
      reject(new Error(`ferry exited with ${code}: ${stderr}`))
    );
    reader.on('line', line => {
      lines.push(line);
      if (line.includes('jupyter_server --gateway-url')) {
        resolve();
      }
    });
  });
  return { child, lines, stderr: () => stderr };
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>(resolve =>
    child.once('exit', code => resolve(code))
  );
  child.kill('SIGTERM');
  return exited;
}

describe('ferry CLI', () => {
  it('documents its options in --help', () => {
    const help = spawnSync(process.execPath, [FERRY, 'gateway', '--help'], {
      encoding: 'utf8'
    });
    expect(help.status).toBe(0);
    for (const option of [
      '--ip',
      '--port',
      '--token-file',
      '--worker-token-file',
      '--kernel-user',
      '--no-auth',
      '--root-dir',
      '--log-level',
      '--cull-idle-timeout',
      '--cull-interval',
      '--cull-connected',
      '--cull-busy',
      '--env-allow',
      '--allow-origin',
      '--max-kernels',
      '--max-kernels-per-user',
      '--max-kernel-starts',
      '--max-ws-messages',
      '--max-guest-ws-messages',
      '--room-idle',
      '--max-share-sockets',
      '--max-share-links',
      '--max-share-visitors',
      '--max-auth-failures',
      '--headers-timeout',
      '--max-pending-connections',
      '--max-pending-per-address'
    ]) {
      expect(help.stdout).toContain(option);
    }
  });

  it('rejects a bad option value with a clear message', () => {
    const run = spawnSync(
      process.execPath,
      [FERRY, 'gateway', '--port', 'eighty'],
      {
        encoding: 'utf8'
      }
    );
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/--port.*expected a non-negative number/);
  });

  it('prints a URL with its token when ready, and never logs the token', async () => {
    const token = 'cli-test-token-0123456789';
    const { child, lines, stderr } = await startCli(['--log-level', 'debug'], {
      FERRY_TOKEN: token
    });
    const link = lines.find(l => l.includes('?token='))!.trim();
    expect(link).toMatch(
      new RegExp(`^http://127\\.0\\.0\\.1:\\d+/lab\\?token=${token}$`)
    );
    const base = new URL(link).origin;
    expect((await fetch(`${base}/api/kernels`)).status).toBe(401);
    const ok = await fetch(`${base}/api/kernels`, {
      headers: { Authorization: `token ${token}` }
    });
    expect(ok.status).toBe(200);
    await fetch(`${base}/api/kernelspecs?token=${token}`);
    expect(await stop(child)).toBe(0);
    expect(stderr()).not.toContain(token);
    expect(stderr()).toContain('shutting down');
  });

  it('takes the share link limits from its options', async () => {
    const token = 'cli-test-token-share-links';
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-cli-shares-'));
    const { child, lines } = await startCli(
      [
        '--root-dir',
        dir,
        '--state-dir',
        path.join(dir, '.state'),
        '--max-share-links',
        '1'
      ],
      { FERRY_TOKEN: token }
    );
    try {
      const link = lines.find(l => l.includes('?token='))!.trim();
      const api = apiFor(new URL(link).origin, token);
      const saved = await api('PUT', '/api/contents/a.ipynb', {
        type: 'notebook',
        content: { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 }
      });
      expect(saved.status).toBe(201);
      const share = { path: 'a.ipynb', scope: 'view' };
      expect((await api('POST', '/api/shares', share)).status).toBe(201);
      const second = await api('POST', '/api/shares', share);
      expect(second.status).toBe(403);
      expect(second.body.message).toContain('at most 1');
    } finally {
      expect(await stop(child)).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('prints a jupyter_server command that runs as printed, with the token out of its argv', async () => {
    const token = 'cli-test-token-9876543210';
    const { child, lines } = await startCli([], { FERRY_TOKEN: token });
    const command = lines
      .find(l => l.includes('-m jupyter_server --gateway-url'))!
      .trim();
    expect(command).toMatch(
      new RegExp(
        // python3, or the full path of the first Python that has jupyter_server (first-start.spec.ts).
        `^JUPYTER_GATEWAY_AUTH_TOKEN=${token} (python3|/\\S+/python3) -m jupyter_server --gateway-url=http://127\\.0\\.0\\.1:\\d+/` +
          (process.getuid?.() === 0 ? ' --allow-root$' : '$')
      )
    );
    const ferryUrl = command.match(/--gateway-url=(\S+)/)![1];
    // Debian's python3 (with python3-jupyter-server) first on the PATH, as on a Debian host.
    const home = mkdtempSync(path.join(tmpdir(), 'ferry-cli-jupyter-'));
    const port = await freePort();
    const serverToken = randomUUID();
    const server = spawn('bash', ['-c', command], {
      env: {
        PATH: `/usr/bin:/bin:${process.env.PATH}`,
        HOME: home,
        JUPYTER_PORT: String(port),
        JUPYTER_TOKEN: serverToken,
        JUPYTER_CONFIG_DIR: path.join(home, '.config'),
        JUPYTER_RUNTIME_DIR: path.join(home, '.runtime'),
        JUPYTER_DATA_DIR: path.join(home, '.data')
      },
      cwd: home,
      stdio: ['ignore', 'ignore', 'pipe']
    });
    let serverLog = '';
    server.stderr!.on('data', chunk => (serverLog += chunk));
    const exited = new Promise(resolve => server.once('exit', resolve));
    try {
      const api = apiFor(`http://127.0.0.1:${port}`, serverToken);
      const ready = new Promise<void>((resolve, reject) => {
        server.once('exit', code =>
          reject(new Error(`jupyter_server exited with ${code}:\n${serverLog}`))
        );
        server.stderr!.on('data', () => {
          if (serverLog.includes(`:${port}/`)) {
            resolve();
          }
        });
      });
      await ready;
      const specs = await api('GET', '/api/kernelspecs');
      expect(specs.status).toBe(200);
      const ferrySpecs = await apiFor(ferryUrl.replace(/\/$/, ''), token)(
        'GET',
        '/api/kernelspecs'
      );
      expect(Object.keys(specs.body.kernelspecs).sort()).toEqual(
        Object.keys(ferrySpecs.body.kernelspecs).sort()
      );
      // What `ps` shows of jupyter_server does not hold Ferry's token.
      const argv = readFileSync(`/proc/${server.pid}/cmdline`, 'utf8');
      expect(argv).toContain('--gateway-url');
      expect(argv).not.toContain(token);
    } finally {
      server.kill('SIGTERM');
      await exited;
      rmSync(home, { recursive: true, force: true });
      await stop(child);
    }
  }, 60000);

  (process.getuid?.() === 0 ? it : it.skip)(
    'says at start-up when kernels (nobody, as root) cannot enter the root directory',
    async () => {
      const closed = mkdtempSync(path.join(tmpdir(), 'ferry-cli-closed-'));
      try {
        const { child, stderr } = await startCli(['--root-dir', closed]);
        expect(stderr()).toContain(
          `kernels run as nobody (uid 65534), who cannot enter the root directory ${closed}`
        );
        await stop(child);
      } finally {
        rmSync(closed, { recursive: true, force: true });
      }
    }
  );

  it('warns loudly without authentication', async () => {
    const { child, lines, stderr } = await startCli(['--no-auth']);
    expect(lines.join('\n')).not.toContain('token=');
    expect(stderr()).toContain('AUTHENTICATION IS OFF');
    const base = lines[0].match(/http:\/\/[^/]+/)![0];
    expect((await fetch(`${base}/api/kernels`)).status).toBe(200);
    await stop(child);
  });
});
