import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import {
  attributeMemory,
  DeviceInventory,
  MIB,
  NvidiaDeviceSource,
  SimulatedDeviceSource,
  type IDeviceSource
} from '../src/agent/devices';
import type { IDevice, IDeviceSample } from '../src/protocol';

const FIXTURES = path.join(__dirname, 'fixtures', 'devices');

/** A logger that keeps every entry, to check what was logged and at which level. */
function recordingLogger(): { logger: pino.Logger; entries: ILogEntry[] } {
  const entries: ILogEntry[] = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => entries.push(JSON.parse(line) as ILogEntry) }
  );
  return { logger, entries };
}

interface ILogEntry {
  level: number;
  msg: string;
  source?: string;
}

const WARN = 40;
const DEBUG = 20;

function device(id: string): IDevice {
  return {
    id,
    kind: 'gpu',
    vendor: 'simulated',
    model: 'X',
    name: 'X',
    visibleId: id,
    labels: {},
    simulated: true
  };
}

/** A source whose samples arrive only when the test lets them (or at once when `instant`). */
class GatedSource implements IDeviceSource {
  readonly name = 'gated';
  calls = 0;
  instant = false;
  private _gates: (() => void)[] = [];

  async discover(): Promise<IDevice[]> {
    return [device('gated-0')];
  }

  sample(devices: readonly IDevice[]): Promise<IDeviceSample[]> {
    const call = ++this.calls;
    const samples = devices.map(d => ({
      deviceId: d.id,
      time: new Date().toISOString(),
      utilizationPercent: call
    }));
    if (this.instant) {
      return Promise.resolve(samples);
    }
    return new Promise(resolve => this._gates.push(() => resolve(samples)));
  }

  /** Let the oldest pending sample finish. */
  release(): void {
    this._gates.shift()?.();
  }
}

/** A source that always fails the same way. */
class BrokenSource implements IDeviceSource {
  readonly name = 'broken';

  async discover(): Promise<IDevice[]> {
    return [device('broken-0')];
  }

  async sample(): Promise<IDeviceSample[]> {
    throw new Error('the driver went away');
  }
}

describe('DeviceInventory', () => {
  let dir: string;
  const inventories: DeviceInventory[] = [];

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-inventory-'));
  });

  afterEach(() => {
    inventories.splice(0).forEach(inventory => inventory.dispose());
    jest.useRealTimers();
  });

  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  function inventory(options: DeviceInventory.IOptions): DeviceInventory {
    const created = new DeviceInventory(options);
    inventories.push(created);
    return created;
  }

  /** nvidia-smi standing in for two H100s, from recorded outputs. */
  async function fakeNvidiaSmi(): Promise<string> {
    const file = path.join(dir, 'nvidia-smi');
    await fs.writeFile(
      file,
      [
        '#!/bin/sh',
        'case "$1" in',
        `  -L) cat '${path.join(FIXTURES, 'nvidia-smi-L-h100x2.txt')}' ;;`,
        `  --query-gpu=*) cat '${path.join(FIXTURES, 'nvidia-smi-h100x2.csv')}' ;;`,
        `  --query-compute-apps=*) cat '${path.join(FIXTURES, 'compute-apps.csv')}' ;;`,
        '  *) exit 64 ;;',
        'esac',
        ''
      ].join('\n'),
      { mode: 0o755 }
    );
    return file;
  }

  it('combines its sources; a source whose tool is missing adds nothing and is logged at debug only', async () => {
    const { logger, entries } = recordingLogger();
    const devices = inventory({
      sources: [
        new SimulatedDeviceSource({ spec: 'tpu:v5e:1' }),
        new NvidiaDeviceSource({ command: await fakeNvidiaSmi() }),
        new NvidiaDeviceSource({
          command: path.join(dir, 'not-installed', 'nvidia-smi')
        })
      ],
      logger
    });
    const found = await devices.discover();
    expect(found.map(d => `${d.vendor}:${d.model}`)).toEqual([
      'simulated:v5e',
      'nvidia:H100',
      'nvidia:H100'
    ]);
    const missing = entries.filter(
      e => e.msg === 'device source not present on this host'
    );
    expect(missing).toEqual([
      expect.objectContaining({ level: DEBUG, source: 'nvidia' })
    ]);
    expect(entries.filter(e => e.level >= WARN)).toEqual([]);
    // Discovery happens once.
    expect(await devices.discover()).toBe(found);
  });

  it('logs a source that fails to discover as a warning and goes on with the others', async () => {
    const command = path.join(dir, 'nvidia-smi-no-driver');
    await fs.writeFile(
      command,
      '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9\n',
      { mode: 0o755 }
    );
    const { logger, entries } = recordingLogger();
    const found = await inventory({
      sources: [
        new NvidiaDeviceSource({ command }),
        new SimulatedDeviceSource({ spec: 'gpu:T4:1' })
      ],
      logger
    }).discover();
    expect(found.map(d => d.id)).toEqual(['sim-gpu-0']);
    expect(entries).toContainEqual(
      expect.objectContaining({
        level: WARN,
        msg: 'device discovery failed',
        source: 'nvidia'
      })
    );
  });

  it('emits one batch with a sample of every device, in device order', async () => {
    const simulated = new SimulatedDeviceSource({
      spec: 'gpu:H100:1',
      busy: () => true
    });
    const devices = inventory({
      sources: [
        new NvidiaDeviceSource({ command: await fakeNvidiaSmi() }),
        simulated
      ]
    });
    const batch = once(devices, 'samples');
    await devices.start();
    const [samples] = (await batch) as [IDeviceSample[]];
    expect(samples.map(s => s.deviceId)).toEqual([
      'GPU-3f2a9c1e-8b7d-4e60-a1f5-2c9d0e7b6a41',
      'GPU-b81d4e07-25c6-4f3a-9e8b-7a0c5d1f2e93',
      'sim-gpu-0'
    ]);
    expect(samples[0].utilizationPercent).toBe(97);
    expect(samples[2].utilizationPercent).toBe(100);
    expect(devices.latest).toBe(samples);
  });

  it('gives the devices of a source that fails to sample a note, and warns once per failure', async () => {
    const { logger, entries } = recordingLogger();
    const devices = inventory({
      sources: [
        new BrokenSource(),
        new SimulatedDeviceSource({ spec: 'gpu:L4:1' })
      ],
      logger
    });
    await devices.discover();
    const first = await devices.sample();
    expect(first[0]).toEqual({
      deviceId: 'broken-0',
      time: expect.any(String),
      note: 'broken sampling failed: the driver went away'
    });
    expect(first[1].deviceId).toBe('sim-gpu-0');
    await devices.sample();
    const failures = entries.filter(e => e.msg === 'device sampling failed');
    expect(failures.map(e => e.level)).toEqual([WARN, DEBUG]);
  });

  it('keeps the first of two devices with one id', async () => {
    const { logger, entries } = recordingLogger();
    const found = await inventory({
      sources: [
        new SimulatedDeviceSource({ spec: 'gpu:H100:1' }),
        new SimulatedDeviceSource({ spec: 'gpu:T4:1' })
      ],
      logger
    }).discover();
    expect(found.map(d => d.model)).toEqual(['H100']);
    expect(entries).toContainEqual(
      expect.objectContaining({
        level: WARN,
        msg: 'device id already taken by another source; ignored'
      })
    );
  });

  it('never starts a tick while the previous one runs, and does not catch up on missed ones', async () => {
    jest.useFakeTimers();
    const gated = new GatedSource();
    const devices = inventory({ sources: [gated], intervalMs: 1000 });
    const batches: IDeviceSample[][] = [];
    devices.on('samples', samples => batches.push(samples));
    await devices.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(gated.calls).toBe(1);

    // The tool hangs for five intervals: no second run piles up behind it.
    await jest.advanceTimersByTimeAsync(5000);
    expect(gated.calls).toBe(1);
    expect(batches).toHaveLength(0);

    // It answers: one batch, then one new tick (it is overdue), not five.
    gated.instant = true;
    gated.release();
    await jest.advanceTimersByTimeAsync(0);
    expect(batches.map(b => b[0].utilizationPercent)).toEqual([1, 2]);
    expect(gated.calls).toBe(2);

    // Fast ticks come one interval apart.
    await jest.advanceTimersByTimeAsync(999);
    expect(gated.calls).toBe(2);
    await jest.advanceTimersByTimeAsync(1);
    expect(gated.calls).toBe(3);
    expect(batches).toHaveLength(3);
  });

  it('stops: no timer left, no further samples, and a tick in flight emits nothing', async () => {
    jest.useFakeTimers();
    const gated = new GatedSource();
    const devices = inventory({ sources: [gated], intervalMs: 1000 });
    const batches: IDeviceSample[][] = [];
    devices.on('samples', samples => batches.push(samples));
    await devices.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(gated.calls).toBe(1);
    devices.stop();
    gated.release();
    await jest.advanceTimersByTimeAsync(10_000);
    expect(batches).toHaveLength(0);
    expect(gated.calls).toBe(1);
    expect(jest.getTimerCount()).toBe(0);
    expect(devices.isRunning).toBe(false);

    // Started again, it samples again.
    gated.instant = true;
    await devices.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(batches).toHaveLength(1);
    devices.stop();
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('attributeMemory', () => {
  const started: ChildProcess[] = [];
  const extraPids: number[] = [];

  afterEach(() => {
    for (const pid of extraPids.splice(0)) {
      try {
        process.kill(pid);
      } catch {
        // Already gone.
      }
    }
    for (const child of started.splice(0)) {
      child.kill();
    }
  });

  function run(command: string, args: string[]): ChildProcess {
    const child = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'inherit']
    });
    started.push(child);
    return child;
  }

  it("charges a kernel for its own and its descendants' device memory, per device", async () => {
    // A kernel whose child runs on the GPU (as a kernel's subprocess or a launcher's child would).
    const kernel = run('sh', ['-c', 'sleep 300 & echo $!; wait']);
    const [line] = (await once(kernel.stdout!, 'data')) as [Buffer];
    const grandchild = Number(line.toString().trim());
    extraPids.push(grandchild);
    const otherKernel = run('sleep', ['300']);
    const stranger = run('sleep', ['300']);
    const gone = run('true', []);
    await once(gone, 'exit');

    const time = new Date().toISOString();
    const samples: IDeviceSample[] = [
      {
        deviceId: 'GPU-a',
        time,
        processes: [
          { pid: grandchild, memoryBytes: 3 * MIB },
          { pid: kernel.pid!, memoryBytes: 1 * MIB },
          { pid: stranger.pid!, memoryBytes: 5 * MIB },
          { pid: gone.pid!, memoryBytes: 7 * MIB }
        ]
      },
      {
        deviceId: 'GPU-b',
        time,
        processes: [
          { pid: otherKernel.pid!, memoryBytes: 2 * MIB },
          { pid: grandchild }
        ]
      },
      { deviceId: 'GPU-c', time, processes: [] },
      { deviceId: 'sim-gpu-0', time, utilizationPercent: 0 }
    ];
    const attributed = await attributeMemory(
      samples,
      new Map([
        ['k1', kernel.pid!],
        ['k2', otherKernel.pid!]
      ])
    );
    expect(attributed).toEqual({
      'GPU-a': { k1: 4 * MIB },
      'GPU-b': { k2: 2 * MIB },
      'GPU-c': {}
    });
  });

  it('follows parents through an injected proc root, whatever the command names hold', async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-proc-'));
    try {
      const stat = async (pid: number, comm: string, ppid: number) => {
        await fs.mkdir(path.join(root, String(pid)));
        await fs.writeFile(
          path.join(root, String(pid), 'stat'),
          `${pid} (${comm}) S ${ppid} ${pid} ${pid} 0 -1 4194560 0 0 0 0\n`
        );
      };
      await stat(1, 'init', 0);
      await stat(50, 'bash', 1);
      await stat(100, 'python3 (ipykernel) x) S 999', 50);
      await stat(7, 'self parent', 7);
      const attributed = await attributeMemory(
        [
          {
            deviceId: 'GPU-a',
            time: new Date().toISOString(),
            processes: [
              { pid: 100, memoryBytes: 10 },
              { pid: 7, memoryBytes: 20 }
            ]
          }
        ],
        new Map([['k', 50]]),
        root
      );
      expect(attributed).toEqual({ 'GPU-a': { k: 10 } });
    } finally {
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});
