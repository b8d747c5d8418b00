import {
  isStatus,
  KernelSocket,
  processAlive,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';

describe('kernels against a real ipykernel', () => {
  let gw: ITestGateway;
  let kernelId: string;

  beforeAll(async () => {
    gw = await startGateway();
    kernelId = await startKernel(gw);
  });

  afterAll(async () => {
    await gw.close();
  });

  describe.each(['legacy', 'v1'] as const)('%s framing', framing => {
    let client: KernelSocket;

    beforeEach(async () => {
      client = await KernelSocket.connect(gw, kernelId, { framing });
    });

    afterEach(async () => {
      await client.close();
    });

    it('runs code and streams stdout and stderr', async () => {
      const run = await client.execute(
        'import sys\nprint("hello", 6 * 7)\nprint("oops", file=sys.stderr)'
      );
      expect(run.reply.content).toMatchObject({ status: 'ok' });
      expect(run.stdout).toBe('hello 42\n');
      expect(run.stderr).toBe('oops\n');
    });

    it('returns results and display data', async () => {
      const run = await client.execute(
        'from IPython.display import display, HTML\ndisplay(HTML("<b>bold</b>"))\n21 * 2'
      );
      const display = run.iopub.find(m => m.header.msg_type === 'display_data');
      expect(display?.content).toMatchObject({
        data: { 'text/html': '<b>bold</b>' }
      });
      const result = run.iopub.find(
        m => m.header.msg_type === 'execute_result'
      );
      expect(result?.content).toMatchObject({ data: { 'text/plain': '42' } });
    });

    it('reports errors with their traceback', async () => {
      const run = await client.execute(
        'def f():\n    raise ValueError("bad value")\nf()'
      );
      expect(run.reply.content).toMatchObject({
        status: 'error',
        ename: 'ValueError'
      });
      const error = run.iopub.find(m => m.header.msg_type === 'error');
      const traceback = (error?.content as { traceback: string[] }).traceback
        .join('\n')
        .replace(/\x1b\[[0-9;]*m/g, '');
      expect(traceback).toContain('ValueError: bad value');
      expect(traceback).toContain('----> 3 f()');
    });

    it('answers input() over stdin', async () => {
      const run = await client.execute(
        'name = input("who? ")\nprint("hi", name)',
        {
          allowStdin: true,
          onInput: prompt => (prompt === 'who? ' ? 'ferry' : 'wrong prompt')
        }
      );
      expect(run.stdout).toContain('hi ferry');
    });

    it('relays only iopub messages signed with the kernel key', async () => {
      // The cell publishes on the kernel's own iopub socket: a message with a made-up signature, one
      // signed and then altered, and one signed as the kernel signs.
      const run = await client.execute(
        [
          'k = get_ipython().kernel',
          's = k.session',
          'def publish(text, signature=None, altered=None):',
          '    content = s.pack({"name": "stdout", "text": text})',
          '    parts = [s.pack(s.msg_header("stream")), s.pack(k.get_parent()["header"]), s.pack({}), content]',
          '    signature = signature or s.sign(parts)',
          '    if altered:',
          '        parts[3] = s.pack({"name": "stdout", "text": altered})',
          '    k.iopub_socket.send_multipart([b"stream", b"<IDS|MSG>", signature, *parts])',
          'publish("made-up signature\\n", signature=b"0" * 64)',
          'publish("signed\\n", altered="altered after signing\\n")',
          'publish("genuine\\n")'
        ].join('\n')
      );
      expect(run.reply.content).toMatchObject({ status: 'ok' });
      expect(run.stdout).toBe('genuine\n');
    });
  });

  it('interrupts a running time.sleep', async () => {
    const client = await KernelSocket.connect(gw, kernelId);
    const running = client.execute('import time\ntime.sleep(60)');
    await client.next(m => m.header.msg_type === 'execute_input');
    const response = await gw.api('POST', `/api/kernels/${kernelId}/interrupt`);
    expect(response.status).toBe(204);
    const run = await running;
    expect(run.reply.content).toMatchObject({
      status: 'error',
      ename: 'KeyboardInterrupt'
    });
    await client.close();
  });

  it('restarts on request: same id, fresh state', async () => {
    const client = await KernelSocket.connect(gw, kernelId);
    await client.execute('remembered = 1');
    const response = await gw.api('POST', `/api/kernels/${kernelId}/restart`);
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ id: kernelId, name: 'python3' });
    const run = await client.execute('print("remembered" in globals())');
    expect(run.stdout).toBe('False\n');
    await client.close();
  });

  it('restarts a kernel killed with SIGKILL and tells the client', async () => {
    const client = await KernelSocket.connect(gw, kernelId);
    const pid = gw.worker.kernelPid(kernelId)!;
    process.kill(pid, 'SIGKILL');
    await client.next(m => isStatus(m, 'restarting'));
    // The same socket keeps working once the kernel is back.
    const run = await client.execute('print("back")');
    expect(run.stdout).toBe('back\n');
    expect(gw.worker.kernelPid(kernelId)).not.toBe(pid);
    await client.close();
  });

  it('shuts down leaving no process behind and closes its sockets', async () => {
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    // A child process started from a cell lives in the kernel's process group.
    const run = await client.execute(
      'import subprocess\np = subprocess.Popen(["sleep", "300"])\nprint(p.pid)'
    );
    const childPid = Number(run.stdout.trim());
    const kernelPid = gw.worker.kernelPid(id)!;
    expect(processAlive(kernelPid)).toBe(true);
    expect(processAlive(childPid)).toBe(true);
    const response = await gw.api('DELETE', `/api/kernels/${id}`);
    expect(response.status).toBe(204);
    expect((await client.closed).code).toBe(1001);
    expect(processAlive(kernelPid)).toBe(false);
    expect(processAlive(childPid)).toBe(false);
    expect((await gw.api('GET', `/api/kernels/${id}`)).status).toBe(404);
  });
});
