/**
 * Debian's jupyter_server 1.23 with `--gateway-url` in front of Ferry, driven through jupyter_server's
 * own REST and websocket API the way a browser drives it.
 */
import { randomUUID } from 'node:crypto';
import { serialize } from '@jupyterlab/services/lib/kernel/serialize';
import WebSocket from 'ws';
import {
  createLogger,
  parseSimulateSpec,
  V1_SUBPROTOCOL,
  Worker
} from '../src';
import {
  connectThrough,
  type KernelSocket,
  processAlive,
  startGateway,
  startJupyterServer,
  type IApiResponse,
  type IJupyterServer,
  type ITestGateway
} from './helpers';

/** Ids in a kernel list. */
function ids(response: IApiResponse): string[] {
  return (response.body as { id: string }[]).map(kernel => kernel.id);
}

describe('jupyter_server --gateway-url in front of Ferry', () => {
  let ferry: ITestGateway;
  let jupyter: IJupyterServer;
  /** jupyter_server, seen through the same REST helper with its own URL and token. */
  let server: ITestGateway;

  beforeAll(async () => {
    // One simulated H100 beside the CPU, for the kernel that Ferry moves onto it.
    ferry = await startGateway({
      worker: new Worker({
        logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
        devices: parseSimulateSpec('gpu:H100:1'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
    jupyter = await startJupyterServer(ferry, {
      // jupyter_server sends its whole environment when a session starts a kernel.
      FERRY_TEST_SECRET: 'do-not-leak',
      KERNEL_FERRY_TEST: 'passed-on'
    });
    server = jupyter.server;
  }, 60000);

  afterAll(async () => {
    await jupyter?.stop();
    if (jupyter?.child.pid) {
      expect(processAlive(jupyter.child.pid)).toBe(false);
    }
    // Nothing went wrong behind the user's back.
    expect(jupyter?.stderr()).not.toMatch(/^\[E |Traceback/m);
    await ferry?.close();
  }, 30000);

  it('lists the kernelspecs Ferry serves', async () => {
    const response = await server.api('GET', '/api/kernelspecs');
    expect(response.status).toBe(200);
    expect(Object.keys(response.body.kernelspecs)).toEqual(
      Object.keys((await ferry.api('GET', '/api/kernelspecs')).body.kernelspecs)
    );
    expect(response.body.kernelspecs.python3.spec).toMatchObject({
      language: 'python'
    });
  });

  describe('a kernel started through jupyter_server', () => {
    let kernelId: string;
    let client: KernelSocket;

    beforeAll(async () => {
      const response = await server.api('POST', '/api/kernels', {
        name: 'python3'
      });
      expect(response.status).toBe(201);
      expect(response.body).toMatchObject({ name: 'python3' });
      kernelId = response.body.id;
      client = await connectThrough(server, kernelId);
    }, 60000);

    afterAll(async () => {
      if (client && client.socket.readyState === WebSocket.OPEN) {
        await client.close();
      }
    });

    it('runs on Ferry', async () => {
      const model = await ferry.api('GET', `/api/kernels/${kernelId}`);
      expect(model.status).toBe(200);
      expect(model.body).toMatchObject({ id: kernelId, name: 'python3' });
      const run = await client.execute('import os\nprint(os.getpid())');
      expect(Number(run.stdout.trim())).toBe(ferry.worker.kernelPid(kernelId));
    });

    it('runs code and shows its output', async () => {
      const run = await client.execute('print("hello", 6 * 7)\n21 * 2');
      expect(run.reply.content).toMatchObject({ status: 'ok' });
      expect(run.stdout).toBe('hello 42\n');
      const result = run.iopub.find(
        m => m.header.msg_type === 'execute_result'
      );
      expect(result?.content).toMatchObject({ data: { 'text/plain': '42' } });
    });

    it('carries binary buffers both ways (as widgets use them)', async () => {
      await client.execute(
        [
          'def _echo(comm, open_msg):',
          '    @comm.on_msg',
          '    def _(msg):',
          '        data = bytes(msg["buffers"][0])',
          '        comm.send({"length": len(data)}, buffers=[data[::-1]])',
          'get_ipython().kernel.comm_manager.register_target("echo", _echo)'
        ].join('\n')
      );
      const commId = randomUUID();
      client.send('shell', 'comm_open', {
        comm_id: commId,
        target_name: 'echo',
        data: {}
      });
      const payload = new Uint8Array([1, 2, 3, 250, 0, 255]);
      const message = {
        channel: 'shell',
        header: {
          msg_id: randomUUID(),
          msg_type: 'comm_msg',
          session: client.session,
          username: 'test',
          date: new Date().toISOString(),
          version: '5.3'
        },
        parent_header: {},
        metadata: {},
        content: { comm_id: commId, data: {} },
        buffers: [new DataView(payload.buffer)]
      };
      client.socket.send(serialize(message as never, ''));
      const echo = await client.next(
        m =>
          m.header.msg_type === 'comm_msg' &&
          (m.content as { comm_id?: string }).comm_id === commId &&
          m.channel === 'iopub'
      );
      expect(echo.content).toMatchObject({ data: { length: 6 } });
      const buffer = echo.buffers?.[0] as DataView;
      expect(
        Array.from(
          new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
        )
      ).toEqual([255, 0, 250, 3, 2, 1]);
    });

    it('interrupts a running time.sleep', async () => {
      const running = client.execute('import time\ntime.sleep(60)');
      await client.next(
        m =>
          m.header.msg_type === 'execute_input' &&
          /sleep\(60\)/.test((m.content as { code: string }).code)
      );
      const started = Date.now();
      const response = await server.api(
        'POST',
        `/api/kernels/${kernelId}/interrupt`
      );
      expect(response.status).toBe(204);
      const run = await running;
      expect(run.reply.content).toMatchObject({
        status: 'error',
        ename: 'KeyboardInterrupt'
      });
      expect(Date.now() - started).toBeLessThan(30000);
    });

    it('restarts: same id, variables gone, the same socket keeps working', async () => {
      await client.execute('remembered = 1');
      const pid = ferry.worker.kernelPid(kernelId);
      const response = await server.api(
        'POST',
        `/api/kernels/${kernelId}/restart`
      );
      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ id: kernelId, name: 'python3' });
      expect(ferry.worker.kernelPid(kernelId)).not.toBe(pid);
      const run = await client.execute('print("remembered" in globals())');
      expect(run.stdout).toBe('False\n');
    });

    it('is listed by jupyter_server and by Ferry', async () => {
      const listed = await server.api('GET', '/api/kernels');
      expect(listed.status).toBe(200);
      expect(ids(listed)).toContain(kernelId);
      // The running-kernels panel shows the kernel idle, with its one websocket (jupyter_server's).
      expect(
        listed.body.find((k: { id: string }) => k.id === kernelId)
      ).toMatchObject({
        name: 'python3',
        execution_state: 'idle',
        connections: 1
      });
      expect(ids(await ferry.api('GET', '/api/kernels'))).toContain(kernelId);
      const model = await server.api('GET', `/api/kernels/${kernelId}`);
      expect(model.status).toBe(200);
      expect(model.body).toMatchObject({ id: kernelId, name: 'python3' });
    });

    it('shuts down: gone from both lists, its process ended', async () => {
      const pid = ferry.worker.kernelPid(kernelId)!;
      await client.close();
      const response = await server.api('DELETE', `/api/kernels/${kernelId}`);
      expect(response.status).toBe(204);
      expect(ids(await server.api('GET', '/api/kernels'))).not.toContain(
        kernelId
      );
      expect(ids(await ferry.api('GET', '/api/kernels'))).not.toContain(
        kernelId
      );
      expect((await server.api('GET', `/api/kernels/${kernelId}`)).status).toBe(
        404
      );
      expect(processAlive(pid)).toBe(false);
    });
  });

  it('gives a session created through jupyter_server a kernel on Ferry', async () => {
    const created = await server.api('POST', '/api/sessions', {
      path: 'notebook.ipynb',
      name: 'notebook.ipynb',
      type: 'notebook',
      kernel: { name: 'python3' }
    });
    expect(created.status).toBe(201);
    const kernelId: string = created.body.kernel.id;
    expect(created.body.kernel).toMatchObject({ name: 'python3' });
    expect(ids(await ferry.api('GET', '/api/kernels'))).toContain(kernelId);
    const client = await connectThrough(server, kernelId);
    const run = await client.execute(
      'import os\nprint(os.getpid(), os.environ.get("KERNEL_FERRY_TEST"), os.environ.get("FERRY_TEST_SECRET"))'
    );
    expect(run.stdout).toBe(
      `${ferry.worker.kernelPid(kernelId)} passed-on None\n`
    );
    await client.close();
    const sessionId: string = created.body.id;
    const listed = await server.api('GET', '/api/sessions');
    expect(listed.body.map((s: { id: string }) => s.id)).toContain(sessionId);
    const deleted = await server.api('DELETE', `/api/sessions/${sessionId}`);
    expect(deleted.status).toBe(204);
    expect(ids(await ferry.api('GET', '/api/kernels'))).not.toContain(kernelId);
  });

  it("keeps a notebook's kernel id when Ferry moves it onto a GPU, and runs it there through jupyter_server", async () => {
    const created = await server.api('POST', '/api/sessions', {
      path: 'moved.ipynb',
      name: 'moved.ipynb',
      type: 'notebook',
      kernel: { name: 'python3' }
    });
    expect(created.status).toBe(201);
    const sessionId: string = created.body.id;
    const kernelId: string = created.body.kernel.id;
    const client = await connectThrough(server, kernelId);
    const sees =
      'import os\nprint(repr(os.environ["CUDA_VISIBLE_DEVICES"]), "x" in globals())';
    await client.execute('x = 1');
    expect((await client.execute(sees)).stdout).toBe("'' True\n");

    // The extension asks Ferry itself: jupyter_server's restart carries no accelerator.
    const moved = await ferry.api('POST', `/api/kernels/${kernelId}/restart`, {
      accelerator: 'gpu:H100:1'
    });
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({
      id: kernelId,
      accelerator: { state: 'assigned', devices: [{ id: 'sim-gpu-0' }] }
    });
    // The same socket through jupyter_server reaches the new process, on the GPU.
    expect((await client.execute(sees)).stdout).toBe("'0' False\n");
    const listed = await server.api('GET', '/api/kernels');
    expect(
      listed.body.find((k: { id: string }) => k.id === kernelId)
    ).toMatchObject({ execution_state: 'idle', connections: 1 });
    const session = await server.api('GET', `/api/sessions/${sessionId}`);
    expect(session.body.kernel.id).toBe(kernelId);

    // A restart from JupyterLab through jupyter_server keeps the GPU.
    const restarted = await server.api(
      'POST',
      `/api/kernels/${kernelId}/restart`
    );
    expect(restarted.status).toBe(200);
    await client.execute('x = 2');
    expect((await client.execute(sees)).stdout).toBe("'0' True\n");
    expect(
      (await ferry.api('GET', `/api/kernels/${kernelId}`)).body.accelerator
    ).toMatchObject({ state: 'assigned', devices: [{ id: 'sim-gpu-0' }] });

    await client.close();
    expect(
      (await server.api('DELETE', `/api/sessions/${sessionId}`)).status
    ).toBe(204);
    const gpu = (await ferry.api('GET', '/api/accelerators')).body.workers[0]
      .devices[0];
    expect(gpu.holders).toEqual([]);
  }, 60000);

  it('does not choose the v1 subprotocol, so browsers fall back to legacy framing', async () => {
    const created = await server.api('POST', '/api/kernels', {
      name: 'python3'
    });
    expect(created.status).toBe(201);
    const kernelId: string = created.body.id;
    const url = `${server.url.replace('http', 'ws')}/api/kernels/${kernelId}/channels?token=${server.token}`;
    const socket = new WebSocket(url, [V1_SUBPROTOCOL]);
    const upgrade = new Promise<string | undefined>(resolve =>
      socket.once('upgrade', response =>
        resolve(response.headers['sec-websocket-protocol'] as string)
      )
    );
    const failed = new Promise<Error>(resolve => socket.once('error', resolve));
    // A browser accepts the missing subprotocol and frames messages the legacy way (as every other
    // socket in this file does); `ws` refuses it instead, which shows what was answered.
    expect(await upgrade).toBeUndefined();
    expect((await failed).message).toMatch(/no subprotocol/);
    expect(
      (await server.api('DELETE', `/api/kernels/${kernelId}`)).status
    ).toBe(204);
  });
});

describe('accelerator kernelspecs through jupyter_server --gateway-url', () => {
  let ferry: ITestGateway;
  let jupyter: IJupyterServer;

  beforeAll(async () => {
    ferry = await startGateway({
      worker: new Worker({
        logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
        devices: parseSimulateSpec('gpu:H100:1'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
    // A server-wide KERNEL_ACCELERATOR, which jupyter_server sends with every start.
    jupyter = await startJupyterServer(ferry, { KERNEL_ACCELERATOR: 'cpu' });
  }, 60000);

  afterAll(async () => {
    await jupyter?.stop();
    expect(jupyter?.stderr()).not.toMatch(/^\[E |Traceback/m);
    await ferry?.close();
  }, 30000);

  it('lists the GPU kernelspec, and a notebook started from it runs on the GPU', async () => {
    const server = jupyter.server;
    const specs = (await server.api('GET', '/api/kernelspecs')).body;
    const gpu = specs.kernelspecs['python3.gpu-h100-x1'];
    expect(gpu.spec.display_name).toBe(
      `${specs.kernelspecs.python3.spec.display_name} · GPU · H100 × 1 (simulated)`
    );
    expect(gpu.spec.metadata.ferry).toEqual({
      base: 'python3',
      accelerator: { kind: 'gpu', model: 'H100', count: 1 },
      simulated: true
    });
    // Its logo (python3's), through jupyter_server's own resource URL; jupyter_server 1.23 labels
    // what its gateway proxy relays application/json, whatever it is.
    const logo = await fetch(`${server.url}${gpu.resources['logo-64x64']}`, {
      headers: { Authorization: `token ${server.token}` }
    });
    expect(logo.status).toBe(200);
    const real = await fetch(
      `${ferry.url}/kernelspecs/python3/logo-64x64.png`,
      {
        headers: { Authorization: `token ${ferry.token}` }
      }
    );
    expect(Buffer.from(await logo.arrayBuffer())).toEqual(
      Buffer.from(await real.arrayBuffer())
    );

    const created = await server.api('POST', '/api/sessions', {
      path: 'gpu.ipynb',
      name: 'gpu.ipynb',
      type: 'notebook',
      kernel: { name: 'python3.gpu-h100-x1' }
    });
    expect(created.status).toBe(201);
    expect(created.body.kernel.name).toBe('python3.gpu-h100-x1');
    const kernelId: string = created.body.kernel.id;
    const model = (await ferry.api('GET', `/api/kernels/${kernelId}`)).body;
    expect(model).toMatchObject({
      name: 'python3.gpu-h100-x1',
      accelerator: { state: 'assigned', devices: [{ id: 'sim-gpu-0' }] }
    });
    const client = await connectThrough(server, kernelId);
    const run = await client.execute(
      'import os\nprint(os.environ["CUDA_VISIBLE_DEVICES"], os.environ["KERNEL_ACCELERATOR"])'
    );
    expect(run.stdout).toBe('0 gpu:H100:1\n');
    await client.close();
    expect(
      (await server.api('DELETE', `/api/sessions/${created.body.id}`)).status
    ).toBe(204);
  }, 60000);
});
