import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');

/** Start `ferry gateway` and resolve with its printed URL once it says it is ready. */
async function startCli(
  args: string[],
  env: NodeJS.ProcessEnv = {}
): Promise<{ child: ChildProcess; lines: string[]; stderr: () => string }> {
  const child = spawn(
    process.execPath,
    [FERRY, 'gateway', '--port', '0', ...args],
    {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe']
    }
  );
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
      if (line.includes('jupyter server --gateway-url')) {
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
      '--token',
      '--no-auth',
      '--root-dir',
      '--log-level',
      '--cull-idle-timeout',
      '--cull-interval',
      '--cull-connected',
      '--cull-busy',
      '--env-allow',
      '--allow-origin'
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

  it('warns loudly without authentication', async () => {
    const { child, lines, stderr } = await startCli(['--no-auth']);
    expect(lines.join('\n')).not.toContain('token=');
    expect(stderr()).toContain('AUTHENTICATION IS OFF');
    const base = lines[0].match(/http:\/\/[^/]+/)![0];
    expect((await fetch(`${base}/api/kernels`)).status).toBe(200);
    await stop(child);
  });
});
