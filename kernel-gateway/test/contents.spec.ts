/**
 * `/api/contents` driven by @jupyterlab/services' ContentsManager, the client JupyterLab's file browser
 * and editors use, plus raw requests for what no well-behaved client sends (path tricks, bad bodies).
 */
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ContentsManager, ServerConnection } from '@jupyterlab/services';
import { FileContentsManager, stagingName } from '../src';
import {
  expectSchema,
  startGateway,
  type IApiResponse,
  type ITestGateway
} from './helpers';

/** A request whose path goes out exactly as written (fetch would resolve `..` and `%2e%2e`). */
function rawRequest(
  gw: ITestGateway,
  method: string,
  rawPath: string,
  body?: string
): Promise<{ status: number; body: { reason?: string; message?: string } }> {
  const url = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: rawPath,
        headers: { Authorization: `token ${gw.token}` }
      },
      response => {
        let text = '';
        response.on('data', chunk => (text += chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            body: JSON.parse(text || '{}')
          })
        );
      }
    );
    req.on('error', reject);
    req.end(body);
  });
}

const sha256 = (bytes: Buffer) =>
  createHash('sha256').update(bytes).digest('hex');

describe('contents API', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let outside: string;
  let labState: string;
  let contents: ContentsManager;

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-contents-')));
    outside = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-outside-')));
    writeFileSync(path.join(outside, 'secret.txt'), 'not yours');
    labState = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-lab-state-'))
    );
    gw = await startGateway({
      rootDir,
      labSettingsDir: path.join(labState, 'user-settings')
    });
    contents = new ContentsManager({
      serverSettings: ServerConnection.makeSettings({
        baseUrl: gw.url,
        token: gw.token
      })
    });
  });

  afterAll(async () => {
    contents.dispose();
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
    rmSync(labState, { recursive: true, force: true });
  });

  it('creates untitled notebooks with jupyter_server names, saves one and reads it back', async () => {
    const first = await contents.newUntitled({ type: 'notebook' });
    const second = await contents.newUntitled({ type: 'notebook' });
    expect([first.name, second.name]).toEqual([
      'Untitled.ipynb',
      'Untitled1.ipynb'
    ]);
    expectSchema('Contents', first);
    expect(first).toMatchObject({
      type: 'notebook',
      path: 'Untitled.ipynb',
      writable: true
    });

    const notebook = {
      cells: [
        {
          cell_type: 'code',
          source: 'x = 1\nprint(x)',
          metadata: {},
          execution_count: 1,
          outputs: [{ output_type: 'stream', name: 'stdout', text: '1\n' }]
        }
      ],
      metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
      nbformat: 4,
      nbformat_minor: 5
    };
    const saved = await contents.save(first.path, {
      type: 'notebook',
      format: 'json',
      content: notebook
    });
    expectSchema('Contents', saved);
    expect(saved.content).toBeNull();

    const read = await contents.get(first.path, { content: true });
    expectSchema('Contents', read);
    expect(read).toMatchObject({
      type: 'notebook',
      format: 'json',
      content: notebook
    });

    // On disk as nbformat writes it: lines split, keys sorted, so Jupyter and git see no churn.
    const onDisk = readFileSync(path.join(rootDir, 'Untitled.ipynb'), 'utf8');
    expect(JSON.parse(onDisk).cells[0].source).toEqual(['x = 1\n', 'print(x)']);
    expect(onDisk.indexOf('"cells"')).toBeLessThan(
      onDisk.indexOf('"metadata"')
    );
    // The save answers with the file it wrote (a client compares it with what is on disk later).
    expect(saved).toMatchObject({
      hash: sha256(Buffer.from(onDisk)),
      hash_algorithm: 'sha256',
      size: Buffer.byteLength(onDisk),
      last_modified: statSync(
        path.join(rootDir, 'Untitled.ipynb')
      ).mtime.toISOString()
    });
  });

  it('reopens a notebook saved trusted as trusted, and no other', async () => {
    const notebook = (trusted: boolean, script = 'alert(1)') => ({
      cells: [
        {
          cell_type: 'code',
          source: 'display(HTML(...))',
          metadata: { trusted },
          execution_count: 1,
          outputs: [
            {
              output_type: 'display_data',
              data: { 'text/html': `<script>${script}</script>` },
              metadata: {}
            }
          ]
        }
      ],
      metadata: {},
      nbformat: 4,
      nbformat_minor: 5
    });
    const trustedFlag = async (file: string) =>
      ((await contents.get(file)).content as ReturnType<typeof notebook>)
        .cells[0].metadata.trusted;

    await contents.save('mine.ipynb', {
      type: 'notebook',
      content: notebook(true)
    });
    expect(await trustedFlag('mine.ipynb')).toBe(true);
    // The flag is the server's to give: it is not written into the file.
    expect(
      readFileSync(path.join(rootDir, 'mine.ipynb'), 'utf8')
    ).not.toContain('trusted');

    // A notebook from elsewhere claiming trust in its file is not trusted.
    writeFileSync(
      path.join(rootDir, 'theirs.ipynb'),
      JSON.stringify(notebook(true, 'steal()'))
    );
    expect(await trustedFlag('theirs.ipynb')).toBe(false);
    // Nor is one saved with an output the user did not trust, nor an edit of a trusted one on disk.
    await contents.save('unsure.ipynb', {
      type: 'notebook',
      content: notebook(false, 'unsure()')
    });
    expect(await trustedFlag('unsure.ipynb')).toBe(false);
    const edited = readFileSync(
      path.join(rootDir, 'mine.ipynb'),
      'utf8'
    ).replace('alert(1)', 'alert(2)');
    writeFileSync(path.join(rootDir, 'mine.ipynb'), edited);
    expect(await trustedFlag('mine.ipynb')).toBe(false);
  });

  it('creates untitled files and folders, and lists them without hidden files', async () => {
    const file = await contents.newUntitled({ type: 'file', ext: '.txt' });
    const folder = await contents.newUntitled({ type: 'directory' });
    const folder2 = await contents.newUntitled({ type: 'directory' });
    expect([file.name, folder.name, folder2.name]).toEqual([
      'untitled.txt',
      'Untitled Folder',
      'Untitled Folder 1'
    ]);
    writeFileSync(path.join(rootDir, '.hidden'), 'dot file');
    mkdirSync(path.join(rootDir, '__pycache__'));
    const listing = await contents.get('');
    expectSchema('Contents', listing);
    const names = (listing.content as { name: string }[]).map(e => e.name);
    expect(names).toEqual(
      expect.arrayContaining(['untitled.txt', 'Untitled Folder'])
    );
    expect(names).not.toContain('.hidden');
    expect(names).not.toContain('__pycache__');
    expect(names).not.toContain('.ipynb_checkpoints');
    (listing.content as unknown[]).forEach(entry =>
      expectSchema('Contents', entry)
    );
  });

  it('reads text and binary files in the format asked for, with their hash', async () => {
    writeFileSync(path.join(rootDir, 'notes.md'), '# Notes\n');
    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff, 0x00]);
    writeFileSync(path.join(rootDir, 'image.png'), bytes);

    const text = await contents.get('notes.md', { content: true, hash: true });
    expectSchema('Contents', text);
    expect(text).toMatchObject({
      format: 'text',
      content: '# Notes\n',
      mimetype: 'text/markdown',
      hash: sha256(Buffer.from('# Notes\n')),
      hash_algorithm: 'sha256'
    });
    const binary = await contents.get('image.png', {
      content: true,
      format: 'base64'
    });
    expect(binary).toMatchObject({ format: 'base64', mimetype: 'image/png' });
    expect(Buffer.from(binary.content as string, 'base64')).toEqual(bytes);
    // Asking for text of a binary file says why it cannot be.
    const refused = await gw.api('GET', '/api/contents/image.png?format=text');
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/not UTF-8/);
  });

  it('serves raw files under /files for downloads and Markdown images, sandboxed', async () => {
    const inline = await fetch(`${gw.url}/files/notes.md?token=${gw.token}`);
    expect(inline.status).toBe(200);
    expect(inline.headers.get('content-type')).toMatch(/text\/markdown/);
    expect(inline.headers.get('content-security-policy')).toBe(
      'sandbox allow-scripts'
    );
    expect(await inline.text()).toBe('# Notes\n');
    const download = await fetch(
      `${gw.url}/files/image.png?download=1&token=${gw.token}`
    );
    expect(download.headers.get('content-disposition')).toMatch(
      /^attachment; filename="?image.png"?$/
    );
    expect(
      Buffer.from(await download.arrayBuffer())
        .subarray(1, 4)
        .toString()
    ).toBe('PNG');
    for (const [url, status] of [
      ['/files/.hidden', 404],
      ['/files/Untitled%20Folder', 404],
      ['/files/nope.txt', 404],
      ['/files/..%2F..%2Fetc%2Fpasswd', 400]
    ] as const) {
      const response = await gw.api('GET', url);
      expect(response.status).toBe(status);
      expectSchema('Error', response.body);
    }
    expect(
      (await gw.api('GET', '/files/notes.md', undefined, { token: null }))
        .status
    ).toBe(401);
  });

  it('renames, refuses to rename over an existing file, and copies as name-Copy1', async () => {
    await contents.save('draft.txt', {
      type: 'file',
      format: 'text',
      content: 'v1'
    });
    await contents.save('taken.txt', {
      type: 'file',
      format: 'text',
      content: 'keep me'
    });
    const renamed = await contents.rename('draft.txt', 'final.txt');
    expectSchema('Contents', renamed);
    expect(renamed.path).toBe('final.txt');
    await expect(contents.get('draft.txt')).rejects.toThrow();

    const conflict = await gw.api('PATCH', '/api/contents/final.txt', {
      path: 'taken.txt'
    });
    expect(conflict.status).toBe(409);
    expectSchema('Error', conflict.body);
    expect(readFileSync(path.join(rootDir, 'taken.txt'), 'utf8')).toBe(
      'keep me'
    );

    const copy = await contents.copy('final.txt', '');
    const copy2 = await contents.copy('final.txt', '');
    expect([copy.name, copy2.name]).toEqual([
      'final-Copy1.txt',
      'final-Copy2.txt'
    ]);
    expect((await contents.get(copy.path)).content).toBe('v1');
  });

  it('creates, lists, restores and deletes a checkpoint', async () => {
    await contents.save('work.txt', {
      type: 'file',
      format: 'text',
      content: 'good'
    });
    const checkpoint = await contents.createCheckpoint('work.txt');
    expectSchema('Checkpoint', checkpoint);
    await contents.save('work.txt', {
      type: 'file',
      format: 'text',
      content: 'broken'
    });
    expect(await contents.listCheckpoints('work.txt')).toEqual([checkpoint]);

    await contents.restoreCheckpoint('work.txt', checkpoint.id);
    expect((await contents.get('work.txt')).content).toBe('good');

    await contents.deleteCheckpoint('work.txt', checkpoint.id);
    expect(await contents.listCheckpoints('work.txt')).toEqual([]);
    const missing = await gw.api(
      'POST',
      '/api/contents/work.txt/checkpoints/checkpoint'
    );
    expect(missing.status).toBe(404);
  });

  it('gives every saved notebook a checkpoint, and deletes it with the file', async () => {
    const nb = await contents.newUntitled({ type: 'notebook' });
    expect(await contents.listCheckpoints(nb.path)).toHaveLength(1);
    await contents.delete(nb.path);
    await expect(contents.get(nb.path)).rejects.toThrow();
    expect(readdirSync(path.join(rootDir, '.ipynb_checkpoints'))).not.toContain(
      nb.name.replace('.ipynb', '-checkpoint.ipynb')
    );
  });

  it('takes a 15 MB file in one base64 PUT, as JupyterLab uploads it', async () => {
    const bytes = randomBytes(15 * 1024 * 1024);
    const model = await contents.save('big.bin', {
      type: 'file',
      format: 'base64',
      content: bytes.toString('base64')
    });
    expect(model.size).toBe(bytes.length);
    const read = await contents.get('big.bin', { content: false, hash: true });
    expect(read.hash).toBe(sha256(bytes));
  });

  it('assembles a chunked upload and shows nothing at the path until the last chunk', async () => {
    const bytes = randomBytes(2.5 * 1024 * 1024);
    const pieces = [0, 1, 2].map(i =>
      bytes.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024)
    );
    const send = (chunk: number, piece: Buffer) =>
      contents.save('upload/data.bin', {
        type: 'file',
        format: 'base64',
        name: 'data.bin',
        chunk,
        content: piece.toString('base64')
      } as Parameters<ContentsManager['save']>[1]);
    mkdirSync(path.join(rootDir, 'upload'));
    expectSchema('Contents', await send(1, pieces[0]));
    await send(2, pieces[1]);
    await expect(contents.get('upload/data.bin')).rejects.toThrow();
    const last = await send(-1, pieces[2]);
    expect(last.size).toBe(bytes.length);
    expect(sha256(readFileSync(path.join(rootDir, 'upload', 'data.bin')))).toBe(
      sha256(bytes)
    );
    expect(readdirSync(path.join(rootDir, 'upload'))).toEqual(['data.bin']);
  });

  it('saves through a symlink inside the root without breaking the link', async () => {
    mkdirSync(path.join(rootDir, 'real'));
    writeFileSync(path.join(rootDir, 'real', 'target.txt'), 'old');
    symlinkSync(
      path.join(rootDir, 'real', 'target.txt'),
      path.join(rootDir, 'alias.txt')
    );
    await contents.save('alias.txt', {
      type: 'file',
      format: 'text',
      content: 'new'
    });
    expect(lstatSync(path.join(rootDir, 'alias.txt')).isSymbolicLink()).toBe(
      true
    );
    expect(readFileSync(path.join(rootDir, 'real', 'target.txt'), 'utf8')).toBe(
      'new'
    );
  });

  it('copies a folder, but not into itself', async () => {
    writeFileSync(path.join(rootDir, 'real', 'more.txt'), 'more');
    const copy = await contents.copy('real', '');
    expect(copy).toMatchObject({ name: 'real-Copy1', type: 'directory' });
    expect(readdirSync(path.join(rootDir, 'real-Copy1')).sort()).toEqual([
      'more.txt',
      'target.txt'
    ]);
    const into = await gw.api('POST', '/api/contents/real', {
      copy_from: 'real'
    });
    expect(into.status).toBe(400);
    expectSchema('Error', into.body);
  });

  it('keeps the old content when a save fails', async () => {
    await contents.save('safe.txt', {
      type: 'file',
      format: 'text',
      content: 'intact'
    });
    const bad = await gw.api('PUT', '/api/contents/safe.txt', {
      type: 'file',
      format: 'base64',
      content: '!!! not base64 !!!'
    });
    expect(bad.status).toBe(400);
    expect(readFileSync(path.join(rootDir, 'safe.txt'), 'utf8')).toBe('intact');
    expect(
      readdirSync(rootDir).filter(name => name.includes('safe.txt'))
    ).toEqual(['safe.txt']);
  });

  describe('refuses what it must, with a clear error', () => {
    beforeAll(() => {
      symlinkSync(outside, path.join(rootDir, 'escape'));
      symlinkSync(
        path.join(outside, 'secret.txt'),
        path.join(rootDir, 'secret-link.txt')
      );
    });

    it.each([
      [
        '.. in the path',
        'GET',
        '/api/contents/../../etc/passwd',
        400,
        undefined
      ],
      [
        'percent-encoded ..',
        'GET',
        '/api/contents/%2e%2e/%2e%2e/etc/passwd',
        400,
        undefined
      ],
      [
        'an encoded slash hiding ..',
        'GET',
        '/api/contents/a%2F..%2F..%2Fetc',
        400,
        undefined
      ],
      [
        'an encoded backslash',
        'GET',
        '/api/contents/..%5C..%5Cetc',
        400,
        undefined
      ],
      ['a NUL byte', 'GET', '/api/contents/notes.md%00.txt', 400, undefined],
      ['a malformed escape', 'GET', '/api/contents/%E0%A4%A', 400, undefined],
      [
        'a symlinked directory leading out',
        'GET',
        '/api/contents/escape',
        403,
        undefined
      ],
      [
        'a file through it',
        'GET',
        '/api/contents/escape/secret.txt',
        403,
        undefined
      ],
      [
        'a symlinked file leading out',
        'GET',
        '/api/contents/secret-link.txt',
        403,
        undefined
      ],
      [
        'a write through it',
        'PUT',
        '/api/contents/escape/new.txt',
        403,
        undefined
      ],
      [
        'a rename out of the root',
        'PATCH',
        '/api/contents/notes.md',
        400,
        '{"path":"../stolen.md"}'
      ],
      [
        'a copy from outside',
        'POST',
        '/api/contents',
        403,
        '{"copy_from":"escape/secret.txt"}'
      ],
      ['a hidden file', 'GET', '/api/contents/.hidden', 404, undefined],
      [
        'a hidden file written',
        'PUT',
        '/api/contents/.bashrc',
        400,
        '{"type":"file","format":"text","content":"x"}'
      ]
    ])(
      '%s',
      async (_what, method, rawPath, status, body: string | undefined) => {
        const response = await rawRequest(
          gw,
          method,
          rawPath,
          body ??
            (method === 'PUT'
              ? '{"type":"file","format":"text","content":"x"}'
              : undefined)
        );
        expect(response.status).toBe(status);
        expectSchema('Error', response.body);
      }
    );

    it('does not serve a file through a symlink that leads out', async () => {
      const response = await rawRequest(gw, 'GET', '/files/escape/secret.txt');
      expect(response.status).toBe(403);
    });

    it('does not list symlinks that lead out of the root, and leaves their target alone', async () => {
      const names = (
        (await contents.get('')).content as { name: string }[]
      ).map(e => e.name);
      expect(names).not.toContain('escape');
      expect(names).not.toContain('secret-link.txt');
      expect(readdirSync(outside)).toEqual(['secret.txt']);
    });

    it('an absolute path means the root, never the file system', async () => {
      const response = await rawRequest(
        gw,
        'GET',
        '/api/contents/%2Fetc%2Fpasswd'
      );
      expect(response.status).toBe(400);
      const plain = await rawRequest(gw, 'GET', '/api/contents//etc/passwd');
      expect(plain.status).toBe(404);
    });

    it.each([
      ['a missing file', 'GET', '/api/contents/nope.txt', undefined, 404],
      [
        'deleting a missing file',
        'DELETE',
        '/api/contents/nope.txt',
        undefined,
        404
      ],
      [
        'renaming a missing file',
        'PATCH',
        '/api/contents/nope.txt',
        { path: 'x.txt' },
        404
      ],
      ['a rename without a path', 'PATCH', '/api/contents/notes.md', {}, 400],
      [
        'a save without a type',
        'PUT',
        '/api/contents/x.txt',
        { content: 'x' },
        400
      ],
      [
        'a file without a format',
        'PUT',
        '/api/contents/x.txt',
        { type: 'file', content: 'x' },
        400
      ],
      [
        'a notebook that is not one',
        'PUT',
        '/api/contents/x.ipynb',
        { type: 'notebook', content: 'x' },
        400
      ],
      [
        'chunk 2 without chunk 1',
        'PUT',
        '/api/contents/y.bin',
        { type: 'file', format: 'base64', content: '', chunk: 2 },
        400
      ],
      [
        'a bad chunk number',
        'PUT',
        '/api/contents/y.bin',
        { type: 'file', format: 'base64', content: '', chunk: 0 },
        400
      ],
      [
        'a save into a missing folder',
        'PUT',
        '/api/contents/no/such/x.txt',
        { type: 'file', format: 'text', content: '' },
        404
      ],
      ['POST to a file', 'POST', '/api/contents/notes.md', {}, 400],
      [
        'an unknown checkpoint',
        'POST',
        '/api/contents/notes.md/checkpoints/other',
        undefined,
        404
      ],
      [
        'an invalid format query',
        'GET',
        '/api/contents/notes.md?format=xml',
        undefined,
        400
      ],
      [
        'an invalid hash query',
        'GET',
        '/api/contents/notes.md?hash=yes',
        undefined,
        400
      ]
    ])('%s', async (_what, method, url, body, status) => {
      const response = await gw.api(method, url, body);
      expect(response.status).toBe(status);
      expectSchema('Error', response.body);
    });

    it('a malformed JSON body', async () => {
      const response = await gw.api('PUT', '/api/contents/x.txt', undefined, {
        raw: '{"type": "file",',
        headers: { 'Content-Type': 'application/json' }
      });
      expect(response.status).toBe(400);
      expect(response.body.message).toMatch(/Malformed JSON/);
    });

    it('no token', async () => {
      const response = await gw.api('GET', '/api/contents', undefined, {
        token: null
      });
      expect(response.status).toBe(401);
      expectSchema('Error', response.body);
    });
  });
});

describe('contents API: every file operation stays inside the root', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let outside: string;

  /** A PUT of a text file's content, or of one chunk of it. */
  const put = (apiPath: string, content: string, chunk?: number) =>
    gw.api('PUT', `/api/contents/${encodePath(apiPath)}`, {
      type: 'file',
      format: 'text',
      content,
      ...(chunk === undefined ? {} : { chunk })
    });
  const encodePath = (apiPath: string) =>
    apiPath.split('/').map(encodeURIComponent).join('/');
  /** The answer, checked to be an error that shows nothing of where the root is on disk. */
  const refused = (response: IApiResponse) => {
    expectSchema('Error', response.body);
    expect(JSON.stringify(response.body)).not.toContain(rootDir);
    expect(JSON.stringify(response.body)).not.toContain(tmpdir());
    return response;
  };
  const outsideFiles = () => readdirSync(outside).sort();

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-rooted-')));
    outside = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-outside-')));
    gw = await startGateway({ rootDir });
  });

  beforeEach(() => {
    rmSync(outside, { recursive: true, force: true });
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'secret.txt'), 'not yours');
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  describe('symlinks leading out', () => {
    it('a chunked upload does not write through a staging file replaced by a symlink between two chunks', async () => {
      expect((await put('victim.txt', 'first ', 1)).status).toBe(201);
      const [staging] = readdirSync(rootDir).filter(n => n.endsWith('.upload'));
      rmSync(path.join(rootDir, staging));
      symlinkSync(
        path.join(outside, 'secret.txt'),
        path.join(rootDir, staging)
      );

      const second = refused(await put('victim.txt', 'second', 2));
      expect(second.status).toBe(409);
      expect(second.body.message).toMatch(/send chunk 1/);
      expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(
        'not yours'
      );
      // The upload is over: its last piece does not move the link into place either.
      expect(refused(await put('victim.txt', 'last', -1)).status).toBe(400);
      expect(readdirSync(rootDir)).not.toContain('victim.txt');

      // Starting again replaces the link, and the file is uploaded inside the root.
      expect((await put('victim.txt', 'one ', 1)).status).toBe(201);
      expect((await put('victim.txt', 'two', -1)).status).toBe(201);
      expect(readFileSync(path.join(rootDir, 'victim.txt'), 'utf8')).toBe(
        'one two'
      );
      expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(
        'not yours'
      );
      expect(outsideFiles()).toEqual(['secret.txt']);
    });

    it('a chunked upload does not write through a symlink planted at the staging name', async () => {
      symlinkSync(
        path.join(outside, 'planted.txt'),
        path.join(rootDir, stagingName('planted.txt'))
      );
      expect((await put('planted.txt', 'mine', 1)).status).toBe(201);
      expect((await put('planted.txt', '!', -1)).status).toBe(201);
      expect(readFileSync(path.join(rootDir, 'planted.txt'), 'utf8')).toBe(
        'mine!'
      );
      expect(outsideFiles()).toEqual(['secret.txt']);
    });

    it('a .ipynb_checkpoints that is a symlink leading out gets no checkpoint, and the notebook still saves', async () => {
      mkdirSync(path.join(rootDir, 'nb'));
      mkdirSync(path.join(outside, 'checkpoints'));
      symlinkSync(
        path.join(outside, 'checkpoints'),
        path.join(rootDir, 'nb', '.ipynb_checkpoints')
      );
      const saved = await gw.api('PUT', '/api/contents/nb/work.ipynb', {
        type: 'notebook',
        format: 'json',
        content: { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 }
      });
      expect(saved.status).toBe(201);
      expect(readdirSync(path.join(outside, 'checkpoints'))).toEqual([]);

      const create = refused(
        await gw.api('POST', '/api/contents/nb/work.ipynb/checkpoints')
      );
      expect(create.status).toBe(403);
      expect(create.body.message).toMatch(/checkpoint.*outside the root/);
      expect(readdirSync(path.join(outside, 'checkpoints'))).toEqual([]);
      const list = await gw.api(
        'GET',
        '/api/contents/nb/work.ipynb/checkpoints'
      );
      expect(list.body).toEqual([]);
    });

    it('a checkpoint that is a symlink to an outside file is neither listed nor restored', async () => {
      mkdirSync(path.join(rootDir, 'cp', '.ipynb_checkpoints'), {
        recursive: true
      });
      symlinkSync(
        path.join(outside, 'secret.txt'),
        path.join(rootDir, 'cp', '.ipynb_checkpoints', 'work-checkpoint.txt')
      );
      expect((await put('cp/work.txt', 'mine')).status).toBe(201);
      const url = '/api/contents/cp/work.txt/checkpoints';
      expect((await gw.api('GET', url)).body).toEqual([]);

      const restore = refused(await gw.api('POST', `${url}/checkpoint`));
      expect(restore.status).toBe(403);
      expect(readFileSync(path.join(rootDir, 'cp', 'work.txt'), 'utf8')).toBe(
        'mine'
      );
      expect(refused(await gw.api('DELETE', `${url}/checkpoint`)).status).toBe(
        403
      );
      expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(
        'not yours'
      );
    });

    it('a checkpoint that is a symlink inside the root still works', async () => {
      mkdirSync(path.join(rootDir, 'cp-in', '.ipynb_checkpoints'), {
        recursive: true
      });
      writeFileSync(path.join(rootDir, 'cp-in', 'saved.txt'), 'good');
      symlinkSync(
        '../saved.txt',
        path.join(rootDir, 'cp-in', '.ipynb_checkpoints', 'work-checkpoint.txt')
      );
      expect((await put('cp-in/work.txt', 'broken')).status).toBe(201);
      const url = '/api/contents/cp-in/work.txt/checkpoints';
      expect((await gw.api('GET', url)).body).toHaveLength(1);
      expect((await gw.api('POST', `${url}/checkpoint`)).status).toBe(204);
      expect(
        readFileSync(path.join(rootDir, 'cp-in', 'work.txt'), 'utf8')
      ).toBe('good');
    });

    it('refuses every kind of write through a folder symlinked out of the root', async () => {
      symlinkSync(outside, path.join(rootDir, 'away'));
      writeFileSync(path.join(rootDir, 'here.txt'), 'here');
      for (const [method, url, body] of [
        [
          'PUT',
          '/api/contents/away/new.txt',
          { type: 'file', format: 'text', content: 'x' }
        ],
        [
          'PUT',
          '/api/contents/away/up.txt',
          { type: 'file', format: 'text', content: 'x', chunk: 1 }
        ],
        ['PUT', '/api/contents/away/dir', { type: 'directory' }],
        ['PATCH', '/api/contents/here.txt', { path: 'away/moved.txt' }],
        ['POST', '/api/contents/away', { copy_from: 'here.txt' }],
        ['POST', '/api/contents/away', { type: 'notebook' }],
        ['DELETE', '/api/contents/away/secret.txt', undefined],
        ['PATCH', '/api/contents/away/secret.txt', { path: 'stolen.txt' }],
        ['POST', '/api/contents', { copy_from: 'away/secret.txt' }],
        ['POST', '/api/contents/away/secret.txt/checkpoints', undefined]
      ] as const) {
        const response = refused(await gw.api(method, url, body));
        expect([method, url, response.status]).toEqual([method, url, 403]);
      }
      expect(outsideFiles()).toEqual(['secret.txt']);
      expect(readdirSync(rootDir)).not.toContain('stolen.txt');
      expect(readFileSync(path.join(rootDir, 'here.txt'), 'utf8')).toBe('here');
    });

    it('follows relative symlinks only as far as the root, in /api/contents and /files', async () => {
      const up = path.relative(rootDir, outside);
      symlinkSync(`${up}/secret.txt`, path.join(rootDir, 'relative-out.txt'));
      mkdirSync(path.join(rootDir, 'deep'));
      symlinkSync('../../', path.join(rootDir, 'deep', 'above'));
      symlinkSync('../here.txt', path.join(rootDir, 'deep', 'alias.txt'));
      for (const url of [
        '/api/contents/relative-out.txt',
        '/files/relative-out.txt',
        '/api/contents/deep/above',
        `/files/deep/above/${path.basename(outside)}/secret.txt`
      ]) {
        const response = refused(await gw.api('GET', url));
        expect([url, response.status]).toEqual([url, 403]);
      }
      const alias = await fetch(
        `${gw.url}/files/deep/alias.txt?token=${gw.token}`
      );
      expect(alias.status).toBe(200);
      expect(await alias.text()).toBe('here');
      expect(
        (await gw.api('GET', '/api/contents/deep/alias.txt')).body.content
      ).toBe('here');
      const listed = (
        await gw.api('GET', '/api/contents/deep')
      ).body.content.map((e: { name: string }) => e.name);
      expect(listed).toEqual(['alias.txt']);
    });

    it('serves a byte range of a file under /files', async () => {
      writeFileSync(path.join(rootDir, 'range.txt'), '0123456789');
      const part = await fetch(`${gw.url}/files/range.txt?token=${gw.token}`, {
        headers: { Range: 'bytes=2-5' }
      });
      expect(part.status).toBe(206);
      expect(part.headers.get('content-range')).toBe('bytes 2-5/10');
      expect(await part.text()).toBe('2345');
      const whole = await fetch(`${gw.url}/files/range.txt?token=${gw.token}`);
      expect(whole.headers.get('content-length')).toBe('10');
      const again = await fetch(`${gw.url}/files/range.txt?token=${gw.token}`, {
        // (fetch adds `Cache-Control: no-cache` to a conditional request unless told otherwise)
        headers: {
          'If-None-Match': whole.headers.get('etag')!,
          'Cache-Control': 'max-age=0'
        }
      });
      expect(again.status).toBe(304);
    });

    it('answers a symlink loop with a 400, and deletes a link leading out without touching its target', async () => {
      symlinkSync('loop-b', path.join(rootDir, 'loop-a'));
      symlinkSync('loop-a', path.join(rootDir, 'loop-b'));
      const loop = refused(await gw.api('GET', '/api/contents/loop-a'));
      expect(loop.status).toBe(400);
      expect(loop.body.message).toMatch(/symbolic links/);

      symlinkSync(
        path.join(outside, 'secret.txt'),
        path.join(rootDir, 'out-link')
      );
      expect((await gw.api('DELETE', '/api/contents/out-link')).status).toBe(
        204
      );
      expect(readdirSync(rootDir)).not.toContain('out-link');
      expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(
        'not yours'
      );
    });
  });

  describe('names', () => {
    it('takes names of up to 255 bytes: saves, chunked uploads, copies and checkpoints', async () => {
      mkdirSync(path.join(rootDir, 'long'));
      const notebook = `${'n'.repeat(249)}.ipynb`; // 255 bytes
      const text = `${'é'.repeat(120)}.txt`; // 244 bytes
      const upload = `${'u'.repeat(251)}.bin`; // 255 bytes
      expect(Buffer.byteLength(notebook)).toBe(255);
      const saved = await gw.api(
        'PUT',
        `/api/contents/long/${encodeURIComponent(notebook)}`,
        {
          type: 'notebook',
          format: 'json',
          content: { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 }
        }
      );
      expect(saved.status).toBe(201);
      const checkpoints = await gw.api(
        'GET',
        `/api/contents/long/${encodeURIComponent(notebook)}/checkpoints`
      );
      expect(checkpoints.body).toHaveLength(1);
      expect((await put(`long/${text}`, 'text')).status).toBe(201);
      expect((await put(`long/${upload}`, 'a', 1)).status).toBe(201);
      expect((await put(`long/${upload}`, 'b', -1)).status).toBe(201);
      expect(readFileSync(path.join(rootDir, 'long', upload), 'utf8')).toBe(
        'ab'
      );
      const copy = await gw.api('POST', '/api/contents/long', {
        copy_from: `long/${text}`
      });
      expect(copy.status).toBe(201);
      expect(copy.body.name).toBe(`${'é'.repeat(120)}-Copy1.txt`);
      // A copy whose name would not fit says so.
      const tooLong = refused(
        await gw.api('POST', '/api/contents/long', {
          copy_from: `long/${upload}`
        })
      );
      expect(tooLong.status).toBe(400);
      expect(tooLong.body.message).toMatch(/Name too long/);
      expect(readdirSync(path.join(rootDir, 'long')).sort()).toEqual(
        [
          notebook,
          text,
          upload,
          `${'é'.repeat(120)}-Copy1.txt`,
          '.ipynb_checkpoints'
        ].sort()
      );
    });

    it('refuses a name over 255 bytes with a 400 that says so', async () => {
      const name = `${'x'.repeat(252)}.txt`; // 256 bytes
      for (const response of [
        await put(name, 'x'),
        await put(name, 'x', 1),
        await gw.api('GET', `/api/contents/${name}`),
        await gw.api('PATCH', '/api/contents/here.txt', { path: name }),
        await gw.api('GET', `/files/${name}`)
      ]) {
        expect(refused(response).status).toBe(400);
        expect(response.body.message).toMatch(/Name too long.*255 bytes/);
      }
    });
  });

  describe('chunked uploads', () => {
    it('refuses chunks out of order, and starts over at chunk 1', async () => {
      expect((await put('order.txt', 'a', 1)).status).toBe(201);
      const skipped = refused(await put('order.txt', 'c', 3));
      expect(skipped.status).toBe(400);
      expect(skipped.body.message).toMatch(/out of order: chunk 2/);
      expect((await put('order.txt', 'b', 2)).status).toBe(201);
      const repeated = refused(await put('order.txt', 'b', 2));
      expect(repeated.status).toBe(400);
      expect(repeated.body.message).toMatch(/out of order: chunk 3/);

      expect((await put('order.txt', 'A', 1)).status).toBe(201);
      expect((await put('order.txt', 'B', 2)).status).toBe(201);
      expect((await put('order.txt', 'C', -1)).status).toBe(201);
      expect(readFileSync(path.join(rootDir, 'order.txt'), 'utf8')).toBe('ABC');
      expect(readdirSync(rootDir).filter(n => n.endsWith('.upload'))).toEqual(
        []
      );
    });

    it('refuses a chunk to a folder', async () => {
      mkdirSync(path.join(rootDir, 'a-folder'));
      writeFileSync(path.join(rootDir, 'a-folder', 'kept.txt'), 'kept');
      for (const chunk of [1, 2, -1]) {
        const response = refused(await put('a-folder', 'x', chunk));
        expect(response.status).toBe(400);
        expect(response.body.message).toMatch(/is a directory/);
      }
      expect(readdirSync(path.join(rootDir, 'a-folder'))).toEqual(['kept.txt']);
      expect(readdirSync(rootDir).filter(n => n.endsWith('.upload'))).toEqual(
        []
      );
    });
  });

  describe('temporaries', () => {
    /** Make `names` in `dir`, last touched `ageMs` ago. */
    const leave = (dir: string, names: string[], ageMs: number) => {
      mkdirSync(dir, { recursive: true });
      const when = new Date(Date.now() - ageMs);
      for (const name of names) {
        writeFileSync(path.join(dir, name), 'half a save');
        utimesSync(path.join(dir, name), when, when);
      }
    };
    const HOURS = 60 * 60 * 1000;

    it('removes stale temporaries when their folder is listed, and never lists or serves them', async () => {
      const dir = path.join(rootDir, 'interrupted');
      leave(
        dir,
        [
          '.~ferry-0123456789abcdef.tmp',
          '.~ferry-0123456789abcdef.upload',
          '.~notes.md.0123456789ab.tmp'
        ],
        2 * HOURS
      );
      leave(dir, ['.~ferry-fedcba9876543210.tmp', 'kept.txt'], 0);
      leave(dir, ['.~not-ours.txt'], 2 * HOURS);
      await gw.api('GET', '/api/contents/interrupted');
      expect(readdirSync(dir).sort()).toEqual([
        '.~ferry-fedcba9876543210.tmp',
        '.~not-ours.txt',
        'kept.txt'
      ]);

      // Even where dot files are shown, the gateway's own temporaries are not.
      const shown = await startGateway({ rootDir, allowHidden: true });
      try {
        const listing = await shown.api('GET', '/api/contents/interrupted');
        expect(
          listing.body.content.map((e: { name: string }) => e.name).sort()
        ).toEqual(['.~not-ours.txt', 'kept.txt']);
        const temp = 'interrupted/.~ferry-fedcba9876543210.tmp';
        expect((await shown.api('GET', `/api/contents/${temp}`)).status).toBe(
          404
        );
        expect((await shown.api('GET', `/files/${temp}`)).status).toBe(404);
        const write = await shown.api('PUT', `/api/contents/${temp}`, {
          type: 'file',
          format: 'text',
          content: 'x'
        });
        expect(write.status).toBe(400);
        expect(write.body.message).toMatch(/temporary/);
      } finally {
        await shown.close();
      }
    });

    it('removes stale temporaries under the root at start-up', async () => {
      const fresh = realpathSync(
        mkdtempSync(path.join(tmpdir(), 'ferry-sweep-'))
      );
      try {
        leave(fresh, ['.~ferry-0000000000000001.tmp', 'mine.txt'], 2 * HOURS);
        leave(
          path.join(fresh, 'a', 'b', '.ipynb_checkpoints'),
          ['.~ferry-0000000000000002.tmp'],
          2 * HOURS
        );
        leave(
          path.join(fresh, 'a'),
          ['.~ferry-0000000000000003.upload'],
          2 * HOURS
        );
        leave(path.join(fresh, 'a'), ['.~ferry-0000000000000004.upload'], 0);
        const manager = new FileContentsManager({ rootDir: fresh });
        expect(await manager.swept).toBe(3);
        expect(readdirSync(fresh)).toEqual(['a', 'mine.txt']);
        expect(readdirSync(path.join(fresh, 'a')).sort()).toEqual([
          '.~ferry-0000000000000004.upload',
          'b'
        ]);
        expect(
          readdirSync(path.join(fresh, 'a', 'b', '.ipynb_checkpoints'))
        ).toEqual([]);
      } finally {
        rmSync(fresh, { recursive: true, force: true });
      }
    });
  });

  describe('names that hide what they are', () => {
    it.each([
      ['a control character', 'bell\u0007.txt'],
      ['a line break', 'two\nlines.txt'],
      ['DEL', 'del\u007f.txt'],
      ['a C1 control', 'csi\u009b.txt'],
      ['a right-to-left override', 'invoice\u202Efdp.exe'],
      ['a bidi isolate', 'a\u2066b.txt'],
      ['a left-to-right mark', 'mark\u200e.txt']
    ])('refuses %s in a new name', async (_what, name) => {
      writeFileSync(path.join(rootDir, 'plain.txt'), 'plain');
      const encoded = encodeURIComponent(name);
      for (const response of [
        await put(name, 'x'),
        await put(name, 'x', 1),
        await gw.api('PUT', `/api/contents/${encoded}`, { type: 'directory' }),
        await gw.api('PATCH', '/api/contents/plain.txt', { path: name }),
        await gw.api('POST', `/api/contents/${encoded}`, {
          copy_from: 'plain.txt'
        })
      ]) {
        expect(refused(response).status).toBe(400);
        expect(response.body.message).toMatch(/not allowed in names/);
        expect(response.body.message).not.toMatch(
          /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/
        );
      }
      expect(readdirSync(rootDir)).not.toContain(name);
    });

    it('still lists, reads, saves and renames a file that already has such a name', async () => {
      const name = 'old\u202Etxt.exe';
      writeFileSync(path.join(rootDir, name), 'from before');
      const listed = (await gw.api('GET', '/api/contents')).body.content.map(
        (e: { name: string }) => e.name
      );
      expect(listed).toContain(name);
      const url = `/api/contents/${encodeURIComponent(name)}`;
      expect((await gw.api('GET', url)).body.content).toBe('from before');
      expect((await put(name, 'edited')).status).toBe(200);
      const renamed = await gw.api('PATCH', url, { path: 'clean.exe.txt' });
      expect(renamed.status).toBe(200);
      expect(readFileSync(path.join(rootDir, 'clean.exe.txt'), 'utf8')).toBe(
        'edited'
      );
    });
  });
});
