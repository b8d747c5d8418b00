/**
 * Every holder of devices gives them back (issue #26's gaps): past 100 % of a quota a kernel of a
 * gateway run with `--hold-devices always` goes on without its devices (its next cell asks again,
 * and is refused while the quota is used up) and a terminal with devices of its own closes, saying
 * why; a kernel adopted on its devices after a gateway restart is held as any other (hold state,
 * idle clock from its adoption, returned when idle). Real gateway processes, real ipykernels and
 * bash on simulated devices, short quotas and timeouts; each step waits for an event. `ferry
 * kernels` lists a kernel holding none as "no devices held (taken at the next cell)".
 */
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import * as path from 'node:path';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { KernelSocket, startKernel } from './helpers';
import { profilesFile, QuotaEvents } from './quota-clients';
import { TerminalClient, useOwnHome } from './terminal-clients';
import { AdoptionRig } from './workers';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');

jest.setTimeout(120_000);
useOwnHome();

describe('a quota used up (--hold-devices always, --auth token)', () => {
  let dir: string;
  let gw: IGatewayProcess;
  let quotaEvents: QuotaEvents;

  beforeAll(async () => {
    const quotas = profilesFile('quota-returns', [
      'quotas:',
      '  default:',
      '    period: rolling-1h',
      "    'gpu:H100': 3s",
      "    'gpu:A100': 3s"
    ]);
    dir = quotas.dir;
    gw = await startGatewayProcess([
      '--profiles',
      quotas.profiles,
      '--simulate',
      'gpu:H100:1,gpu:A100:1',
      '--hold-devices',
      'always',
      '--usage-flush-interval',
      '1'
    ]);
    quotaEvents = await QuotaEvents.open(gw.url, { token: gw.token });
  });

  afterAll(async () => {
    quotaEvents?.close();
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("returns a kernel's devices held from its start; its next cell asks again and is refused", async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'H100', count: 1 }
    });
    const socket = await KernelSocket.connect(gw, id);
    expect((await socket.execute('x = 1')).reply.content).toMatchObject({
      status: 'ok'
    });
    await quotaEvents.until(e => e.action === 'returned' && e.kernel_id === id);
    // It goes on without devices: nothing holds any, and its model says so.
    expect((await gw.api('GET', '/api/admin/holders')).body.holders).toEqual(
      []
    );
    const model = (await gw.api('GET', `/api/kernels/${id}`)).body;
    expect(model).toMatchObject({
      execution_state: 'idle',
      accelerator: { devices: [], held: false }
    });
    // `ferry kernels` says so in words.
    const listed = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [FERRY, 'kernels', '--gateway', gw.url],
        { env: { ...process.env, FERRY_TOKEN: gw.token } },
        (error, stdout, stderr) =>
          error
            ? reject(new Error(`${error.message}\n${stderr}`))
            : resolve(stdout)
      )
    );
    expect(listed).toMatch(
      new RegExp(
        `^${id.slice(0, 8)} +python3 +idle +GPU · H100 × 1 +no devices held \\(taken at the next cell\\)$`,
        'm'
      )
    );
    const accelerators = (await gw.api('GET', '/api/accelerators')).body;
    expect(accelerators.kernels[id].hold).toMatchObject({
      state: 'returned',
      lastReturn: { cause: 'quota', stateKept: false }
    });
    // Its next cell says why its devices went, then cannot take them again (the quota).
    const next = await socket.execute('y = 2');
    expect(next.stderr).toMatch(/went back to the pool .* because its quota/);
    expect(next.stderr).toMatch(/used up .*0 s remain/);
    expect(next.reply.content).toMatchObject({ status: 'error' });
    await socket.close();
  });

  it('closes a terminal holding devices of its own, saying why', async () => {
    const opened = await gw.api('POST', '/api/terminals', {
      accelerator: 'gpu:A100:1'
    });
    expect(opened.status).toBe(200);
    const name = opened.body.name as string;
    const term = await TerminalClient.connect(gw.url, name, gw.token);
    term.run('echo "devices=[$FERRY_DEVICES]"');
    await term.waitFor(/devices=\[\S+\]/);
    const closed = await term.closed;
    expect(closed.code).toBe(1000);
    expect(closed.reason).toMatch(/^Terminal closed: its devices went back/);
    expect(term.output).toMatch(
      /terminal closed: its devices went back to the pool because its quota was used up \(.* of GPU · A100 device time/
    );
    await quotaEvents.until(
      e => e.action === 'returned' && e.terminal === name
    );
    expect((await gw.api('GET', `/api/terminals/${name}`)).status).toBe(404);
    expect((await gw.api('GET', '/api/admin/holders')).body.holders).toEqual(
      []
    );
  });
});

describe('a kernel adopted on its devices after a gateway restart (a remote worker)', () => {
  const rig = AdoptionRig.use('holds-adoption', {
    holds: {
      mode: 'when-used',
      idleReturnMs: { gpu: 3000 },
      when: 'always',
      warningMs: 500
    }
  });

  it('is held, its idle clock running from its adoption, and gives its devices back when idle', async () => {
    let gw = await rig.start('holds-host', [
      '--simulate',
      'gpu:H100:1',
      '--no-cpu'
    ]);
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const socket = await KernelSocket.connect(gw, id);
    // Its first cell takes the devices.
    await socket.execute('x = 41');
    await socket.close();
    expect(gw.gateway.registry.get(id)!.placement!.deviceIds).toHaveLength(1);

    const restarted = await rig.restart();
    gw = restarted.gw;
    const returned = new Promise<{ kernelId: string; cause: string }>(resolve =>
      gw.gateway.registry.once('devices-returned', resolve)
    );
    const adoptedAt = Date.now();
    await restarted.adopted;
    const kernel = gw.gateway.registry.get(id)!;
    expect(kernel.placement!.deviceIds).toHaveLength(1);
    const hold = gw.gateway.registry.holdOf(id)!.hold;
    expect(hold.state).toBe('held');
    expect(Date.parse(hold.idleSince!)).toBeGreaterThanOrEqual(
      adoptedAt - 1000
    );
    expect(hold.returnsAt).toBeDefined();
    // Idle past its timeout: its devices go back as any kernel's do.
    expect(await returned).toMatchObject({ kernelId: id, cause: 'idle' });
    expect(gw.gateway.registry.holdOf(id)!.hold.state).toBe('returned');
    expect(gw.gateway.registry.get(id)!.placement!.deviceIds).toEqual([]);

    // Restarted again while it holds nothing: adopted still asking for its GPU, which its next
    // cell takes (before, it came back a CPU kernel for good).
    const again = await rig.restart();
    gw = again.gw;
    await again.adopted;
    const adopted = gw.gateway.registry.get(id)!;
    expect(adopted.accelerator).toMatchObject({ kind: 'gpu', count: 1 });
    expect(gw.gateway.registry.holdOf(id)!.hold.state).toBe('returned');
    const next = await KernelSocket.connect(gw, id);
    const cell = await next.execute(
      'import os\nprint(os.environ.get("CUDA_VISIBLE_DEVICES"))'
    );
    expect(cell.stdout).toBe('0\n');
    expect(gw.gateway.registry.holdOf(id)!.hold.state).toBe('held');
    await next.close();
  }, 120000);
});
