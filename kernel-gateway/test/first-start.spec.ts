/**
 * What a new user meets in the first minute (#27): `ferry gateway --notebooks-dir` makes a notebooks
 * folder with the example notebooks, readable logs on a terminal and JSON into pipes, a printed
 * jupyter_server command whose Python has jupyter_server, a token kept across restarts, and a
 * `ferry run` without a token told where to put one. Each is looked at as the command line shows it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import * as pty from '@lydell/node-pty';
import { findJupyterServerPython } from '../src/cli/python';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');
const EXAMPLES = path.join(__dirname, '..', 'templates', 'notebooks');

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'ferry-first-start-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The environment of a user who has set no token. */
function envWithout(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.FERRY_TOKEN;
  delete env.FERRY_LOG_FORMAT;
  return { ...env, ...extra };
}

interface IStarted {
  child: ChildProcess;
  lines: string[];
  stderr: () => string;
  base: string;
  token: string;
}

/** Start `ferry gateway` (state in `dir/state`) and resolve once it has printed all it prints. */
async function start(
  args: string[],
  env: NodeJS.ProcessEnv = envWithout()
): Promise<IStarted> {
  const child = spawn(
    process.execPath,
    [
      FERRY,
      'gateway',
      '--port',
      '0',
      '--state-dir',
      path.join(dir, 'state'),
      ...args
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] }
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
      if (line.trim().startsWith('notebooks:')) {
        // The token line, when there is one, comes right after.
        setImmediate(resolve);
      }
    });
  });
  const link = lines.find(line => line.includes('/lab?token='))!.trim();
  const url = new URL(link);
  return {
    child,
    lines,
    stderr: () => stderr,
    base: url.origin,
    token: url.searchParams.get('token')!
  };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode === null) {
    const exited = new Promise(resolve => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

/** Run `ferry` to its end. */
function ferry(
  args: string[],
  env: NodeJS.ProcessEnv
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise(resolve => {
    const child = spawn(process.execPath, [FERRY, ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe']
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', chunk => (stdout += chunk));
    child.stderr.on('data', chunk => (stderr += chunk));
    child.once('exit', code => resolve({ code, stdout, stderr }));
  });
}

describe('the first start', () => {
  it('makes the notebooks folder with the examples once, never overwriting, and --root-dir wins', async () => {
    const notebooks = path.join(dir, 'notebooks');
    const first = await start(['--notebooks-dir', notebooks]);
    try {
      expect(first.lines).toContain(`    notebooks: ${notebooks}`);
      const examples = readdirSync(EXAMPLES).filter(n => n.endsWith('.ipynb'));
      expect(examples.length).toBeGreaterThanOrEqual(2);
      expect(readdirSync(notebooks).sort()).toEqual(examples.sort());
      // The file browser shows them, and nothing of the repository.
      const listing = (await (
        await fetch(`${first.base}/api/contents/`, {
          headers: { Authorization: `token ${first.token}` }
        })
      ).json()) as { content: { name: string }[] };
      expect(listing.content.map(entry => entry.name).sort()).toEqual(
        examples.sort()
      );
    } finally {
      await stop(first.child);
    }
    // The user edits one example and deletes another: a later start keeps both choices.
    const edited = path.join(notebooks, examples()[0]);
    writeFileSync(edited, '{"edited": true}');
    rmSync(path.join(notebooks, examples()[1]));
    const second = await start(['--notebooks-dir', notebooks]);
    await stop(second.child);
    expect(readFileSync(edited, 'utf8')).toBe('{"edited": true}');
    expect(existsSync(path.join(notebooks, examples()[1]))).toBe(false);
    // --root-dir wins over the notebooks folder, which is then not made.
    const own = path.join(dir, 'own');
    mkdirSync(own);
    const elsewhere = path.join(dir, 'never-made');
    const third = await start([
      '--notebooks-dir',
      elsewhere,
      '--root-dir',
      own
    ]);
    await stop(third.child);
    expect(third.lines).toContain(`    notebooks: ${own}`);
    expect(existsSync(elsewhere)).toBe(false);
    expect(readdirSync(own)).toEqual([]);

    function examples(): string[] {
      return readdirSync(EXAMPLES)
        .filter(n => n.endsWith('.ipynb'))
        .sort();
    }
  });

  it('logs JSON into a pipe, readable lines on a terminal, and either when told', async () => {
    const piped = await start(['--root-dir', dir]);
    await stop(piped.child);
    const firstLog = piped.stderr().split('\n')[0];
    expect(JSON.parse(firstLog)).toMatchObject({ level: 30 });
    const forced = await start(['--root-dir', dir, '--log-format', 'pretty']);
    await stop(forced.child);
    expect(forced.stderr()).not.toContain('{"level"');
    expect(forced.stderr()).toMatch(/INFO.*: open files: at most/);

    // On a terminal (a pseudo-terminal, as a user's): readable, with no JSON line.
    const terminal = pty.spawn(
      process.execPath,
      [
        FERRY,
        'gateway',
        '--port',
        '0',
        '--root-dir',
        dir,
        '--state-dir',
        path.join(dir, 'state')
      ],
      { env: envWithout() as Record<string, string>, cols: 200, rows: 50 }
    );
    let screen = '';
    const exited = new Promise(resolve => terminal.onExit(resolve));
    await new Promise<void>(resolve =>
      terminal.onData(data => {
        screen += data;
        if (screen.includes('notebooks:')) {
          resolve();
        }
      })
    );
    terminal.kill('SIGTERM');
    await exited;
    const text = screen.replace(/\x1b\[[0-9;]*m/g, '');
    expect(text).toMatch(/\[\d\d:\d\d:\d\d\] INFO: open files: at most/);
    expect(text).not.toContain('{"level"');
    expect(text).toContain('/lab?token=');
    const json = await start(
      ['--root-dir', dir],
      envWithout({ FERRY_LOG_FORMAT: 'json' })
    );
    await stop(json.child);
    expect(JSON.parse(json.stderr().split('\n')[0])).toMatchObject({
      level: 30
    });
  }, 30000);

  it('prints a jupyter_server command whose Python has jupyter_server, even when the first python3 lacks it', async () => {
    // A python3 first on the PATH that lacks jupyter_server (a pyenv or conda one).
    const bare = path.join(dir, 'bare-bin');
    mkdirSync(bare);
    writeFileSync(
      path.join(bare, 'python3'),
      '#!/bin/sh\necho "No module named jupyter_server" >&2\nexit 1\n'
    );
    chmodSync(path.join(bare, 'python3'), 0o755);
    const env = envWithout({ PATH: `${bare}:${process.env.PATH}` });
    const started = await start(['--root-dir', dir], env);
    await stop(started.child);
    const command = started.lines.find(l => l.includes('-m jupyter_server'))!;
    const python = /(\S+) -m jupyter_server/.exec(command)![1];
    expect(python).not.toBe('python3');
    const check = spawn(python, ['-c', 'import jupyter_server'], { env });
    expect(await new Promise(resolve => check.once('exit', resolve))).toBe(0);
    // With no Python that has it, the line says how to get one.
    expect(findJupyterServerPython([path.join(bare, 'python3')])).toBe(
      undefined
    );
  });

  it('keeps the token across restarts in the state directory (0600), or not, as start-up says', async () => {
    const first = await start(['--root-dir', dir]);
    await stop(first.child);
    const file = path.join(dir, 'state', 'token');
    expect(first.lines).toContain(
      `    token: new, kept in ${file} (0600) for later starts; --no-keep-token makes a new one each start`
    );
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const second = await start(['--root-dir', dir]);
    try {
      expect(second.token).toBe(first.token);
      expect(second.lines.join('\n')).toContain(
        `token: the one kept in ${file} (0600) since an earlier start`
      );
    } finally {
      await stop(second.child);
    }
    // FERRY_TOKEN wins over the kept one.
    const given = await start(
      ['--root-dir', dir],
      envWithout({ FERRY_TOKEN: 'given-token-0123456789abcdef' })
    );
    await stop(given.child);
    expect(given.token).toBe('given-token-0123456789abcdef');
    expect(given.lines.join('\n')).not.toContain('token: ');
    // --no-keep-token: a new one each start, and the kept file removed.
    const fresh = await start(['--root-dir', dir, '--no-keep-token']);
    await stop(fresh.child);
    expect(fresh.token).not.toBe(first.token);
    expect(existsSync(file)).toBe(false);
    expect(fresh.lines.join('\n')).toContain(
      'token: new at this start (--no-keep-token)'
    );
  }, 30000);

  it("npm start's build prints one line when it succeeds, and all of its output when it fails", async () => {
    // An npm first on the PATH that speaks as the build does (rspack, npm warn), then succeeds or
    // fails as told: what the script shows of it is what is tested.
    const bin = path.join(dir, 'npm-bin');
    mkdirSync(bin);
    writeFileSync(
      path.join(bin, 'npm'),
      '#!/bin/sh\necho "npm warn config noise"\necho "rspack compiled 413 files" >&2\nexit "${FAKE_BUILD_EXIT:-0}"\n'
    );
    chmodSync(path.join(bin, 'npm'), 0o755);
    const script = path.join(
      __dirname,
      '..',
      '..',
      'scripts',
      'build-quietly.sh'
    );
    const build = (exit: number) =>
      new Promise<{ code: number | null; out: string }>(resolve => {
        const child = spawn('bash', [script], {
          env: envWithout({
            PATH: `${bin}:${process.env.PATH}`,
            FAKE_BUILD_EXIT: String(exit),
            TMPDIR: dir
          }),
          stdio: ['ignore', 'pipe', 'pipe']
        });
        let out = '';
        child.stdout.on('data', chunk => (out += chunk));
        child.stderr.on('data', chunk => (out += chunk));
        child.once('exit', code => resolve({ code, out }));
      });
    const ok = await build(0);
    expect(ok.code).toBe(0);
    expect(ok.out).toMatch(
      /^Building Ferry \(a minute or two the first time\)\.\.\. done in \d+s\n$/
    );
    const failed = await build(3);
    expect(failed.code).toBe(3);
    expect(failed.out).toContain('npm warn config noise');
    expect(failed.out).toContain('rspack compiled 413 files');
    const kept = /its output is kept in (\S+)/.exec(failed.out)![1];
    expect(readFileSync(kept, 'utf8')).toContain('rspack compiled 413 files');
    // npm start builds through it, and serves the notebooks folder.
    const start = (
      JSON.parse(
        readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')
      ) as { scripts: { start: string } }
    ).scripts.start;
    expect(start).toContain('bash scripts/build-quietly.sh');
    expect(start).toMatch(/ferry\.js gateway --notebooks-dir notebooks$/);
  });

  it('ferry run without a token names FERRY_TOKEN and --token-file', async () => {
    const gateway = await start(['--root-dir', dir]);
    try {
      const notebook = path.join(dir, 'job.ipynb');
      writeFileSync(
        notebook,
        JSON.stringify({
          cells: [],
          metadata: {},
          nbformat: 4,
          nbformat_minor: 5
        })
      );
      const run = await ferry(
        ['run', notebook, '--gateway', gateway.base],
        envWithout()
      );
      expect(run.code).not.toBe(0);
      expect(run.stderr).toContain('401');
      expect(run.stderr).toContain('FERRY_TOKEN');
      expect(run.stderr).toContain('--token-file');
      const wrong = await ferry(
        ['run', notebook, '--gateway', gateway.base],
        envWithout({ FERRY_TOKEN: 'not-the-gateways-token-0123' })
      );
      expect(wrong.stderr).toContain("is not this gateway's");
    } finally {
      await stop(gateway.child);
    }
  });
});
