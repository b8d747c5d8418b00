/**
 * jupyter_server 1.23's own gateway client classes (`GatewayKernelManager`, `GatewayKernelClient`, what
 * nbclient-style tools use against a gateway), run by Debian's Python against a real Ferry. The client
 * sends its messages without a `channel` field; Ferry takes them as `shell`, as jupyter_server does.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { startGateway, type ITestGateway } from './helpers';

const run = promisify(execFile);

describe("jupyter_server 1.23's GatewayKernelManager and GatewayKernelClient", () => {
  let gw: ITestGateway;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let results: any;

  beforeAll(async () => {
    // 1.23's GatewayKernelClient opens its websocket without credentials (it passes no header), so
    // it can only talk to a gateway that accepts channel sockets without a token: --no-auth.
    gw = await startGateway({ auth: false });
    const { stdout } = await run(
      '/usr/bin/python3',
      [path.join(__dirname, 'fixtures', 'gateway_client_checks.py')],
      {
        env: {
          ...process.env,
          JUPYTER_GATEWAY_URL: gw.url,
          JUPYTER_GATEWAY_AUTH_TOKEN: gw.token
        },
        timeout: 150000,
        maxBuffer: 16 * 1024 * 1024
      }
    );
    results = JSON.parse(stdout.trim().split('\n').pop()!);
  }, 180000);

  afterAll(async () => {
    await gw?.close();
  });

  it('gets kernel_info from the kernel Ferry started', () => {
    expect(results.kernel_info).toMatchObject({
      status: 'ok',
      implementation: 'ipython',
      language_info: { name: 'python' }
    });
  });

  it('executes: stdout, stderr, display data and the result, in order', () => {
    const { reply, outputs } = results.execute;
    expect(reply).toMatchObject({ status: 'ok' });
    expect(outputs.map((o: { type: string }) => o.type)).toEqual([
      'execute_input',
      'stream',
      'stream',
      'display_data',
      'execute_result'
    ]);
    expect(outputs[1].content).toEqual({ name: 'stdout', text: 'to stdout\n' });
    expect(outputs[2].content).toEqual({ name: 'stderr', text: 'to stderr\n' });
    expect(outputs[3].content.data['text/html']).toBe('<b>bold</b>');
    expect(outputs[4].content.data['text/plain']).toBe('42');
  });

  it('reports an error with its traceback', () => {
    expect(results.error.reply).toMatchObject({
      status: 'error',
      ename: 'ZeroDivisionError'
    });
    const error = results.error.outputs.find(
      (o: { type: string }) => o.type === 'error'
    );
    expect(error.content.traceback.join('\n')).toContain('ZeroDivisionError');
  });

  it('passes clear_output through', () => {
    const types = results.clear_output.outputs.map(
      (o: { type: string }) => o.type
    );
    expect(types).toEqual([
      'execute_input',
      'stream',
      'clear_output',
      'stream'
    ]);
    expect(results.clear_output.outputs[3].content.text).toBe('kept\n');
  });

  it('completes, inspects, checks completeness and reads history', () => {
    expect(results.complete).toMatchObject({ status: 'ok' });
    expect(results.complete.matches).toContain('ferry_value');
    expect(results.inspect).toMatchObject({ status: 'ok', found: true });
    expect(results.inspect.data['text/plain']).toContain('41');
    expect(results.is_complete_incomplete).toMatchObject({
      status: 'incomplete'
    });
    expect(results.is_complete_complete).toMatchObject({ status: 'complete' });
    const sources = results.history.history.map(
      (entry: [number, number, string]) => entry[2]
    );
    expect(sources).toContain('ferry_value = 41');
  });

  it('interrupts a running cell through the manager', () => {
    expect(results.interrupt.reply).toMatchObject({
      status: 'error',
      ename: 'KeyboardInterrupt'
    });
  });

  it('restarts under the same id with a fresh namespace, then shuts down', async () => {
    expect(results.restart_kernel_id).toBe(results.kernel_id);
    expect(results.after_restart.outputs[1].content.text).toBe('gone\n');
    expect(results.model_after_shutdown).toBeNull();
    const listed = await gw.api('GET', '/api/kernels');
    expect(listed.body.map((k: { id: string }) => k.id)).not.toContain(
      results.kernel_id
    );
  });
});
