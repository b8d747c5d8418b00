/**
 * Device files by allocation on a host worker: a real `ferry gateway` running as root, its embedded
 * worker with two simulated GPUs that declare device files made here with mknod (char 195:0 and
 * 195:1, as /dev/nvidia0 and /dev/nvidia1), and real ipykernels (as nobody) that try to open both.
 * With no driver behind major 195, opening a file the kernel may open fails ENXIO; one its devices
 * cgroup denies fails EPERM.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createLogger, KernelUser, ProcessLimits, Worker } from '../src';
import {
  nvidiaDeviceFiles,
  nvidiaDevices,
  parseNvidiaGpuCsv,
  parseNvidiaInformation,
  parseNvidiaList,
  parseSimulateSpec,
  rocmDeviceFiles,
  simulatedDeviceFiles,
  tpuDeviceFiles
} from '../src/agent/devices';
import type { IDevice } from '../src/protocol/devices';
import {
  KernelSocket,
  startGateway as startInProcessGateway,
  startKernel,
  type ITestGateway
} from './helpers';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { TerminalClient } from './terminal-clients';

/** Where cgroup v1 mounts its devices hierarchy on this kind of host. */
const DEVICES_CGROUP = '/sys/fs/cgroup/devices';

/** Two character device files in a folder of their own, 195:0 and 195:1 (nvidia0, nvidia1). */
function makeDeviceFiles(): { dir: string; files: string[] } {
  const dir = mkdtempSync(path.join(tmpdir(), 'ferry-device-files-'));
  chmodSync(dir, 0o755);
  const files = [0, 1].map(minor => {
    const file = path.join(dir, `nvidia${minor}`);
    execFileSync('mknod', ['-m', '666', file, 'c', '195', String(minor)]);
    return file;
  });
  return { dir, files };
}

/** This process's cgroups in the devices hierarchy (`ferry-<pid>-<n>`). */
function devicesCgroupsOf(pid: number | undefined): string[] {
  return readdirSync(DEVICES_CGROUP).filter(name =>
    name.startsWith(`ferry-${pid}-`)
  );
}

/** Python that prints what opening each file gives: OPEN, or the errno's name. */
function opens(files: string[]): string {
  return [
    'import errno, os',
    // Kernel code can drop the isolation variables; the files must stay shut all the same.
    "os.environ.pop('CUDA_VISIBLE_DEVICES', None)",
    'def probe(p):',
    '    try:',
    '        os.close(os.open(p, os.O_RDWR))',
    "        return 'OPEN'",
    '    except OSError as e:',
    '        return errno.errorcode[e.errno]',
    `print(*[probe(p) for p in ${JSON.stringify(files)}])`
  ].join('\n');
}

// mknod, cgroups and kernels as nobody need root; the rules need cgroup v1's devices controller.
(process.getuid?.() === 0 &&
  existsSync(path.join(DEVICES_CGROUP, 'devices.deny'))
  ? describe
  : describe.skip)('device files by allocation on a host worker', () => {
  let gw: IGatewayProcess;
  let dir: string;
  let files: string[];

  beforeAll(async () => {
    ({ dir, files } = makeDeviceFiles());
    gw = await startGatewayProcess([
      '--simulate',
      `gpu:H100:1:node=${files[0]},gpu:A100:1:node=${files[1]}`
    ]);
  });

  afterAll(async () => {
    const pid = gw?.child.pid;
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
    // The worker's devices cgroups go with it.
    expect(devicesCgroupsOf(pid)).toEqual([]);
  });

  async function probe(id: string): Promise<string> {
    const socket = await KernelSocket.connect(gw, id);
    try {
      const run = await socket.execute(opens(files));
      expect(run.stderr).toBe('');
      return run.stdout.trim();
    } finally {
      await socket.close();
    }
  }

  it('says at start-up that device files are kept apart', () => {
    expect(gw.stderr()).toContain(
      'a kernel or terminal cannot open the device files of accelerators it does not hold (cgroup v1 devices, 2 devices)'
    );
  });

  it('lets a GPU kernel open its own device file only, after a restart and a move too', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      env: { KERNEL_ACCELERATOR: 'gpu:H100:1' }
    });
    try {
      expect(await probe(id)).toBe('ENXIO EPERM');

      const restarted = await gw.api('POST', `/api/kernels/${id}/restart`);
      expect(restarted.status).toBe(200);
      expect(await probe(id)).toBe('ENXIO EPERM');

      const moved = await gw.api('POST', `/api/kernels/${id}/restart`, {
        accelerator: { kind: 'gpu', model: 'A100', count: 1 }
      });
      expect(moved.status).toBe(200);
      expect(moved.body.accelerator.devices).toMatchObject([
        { id: 'sim-gpu-1', model: 'A100' }
      ]);
      expect(await probe(id)).toBe('EPERM ENXIO');
    } finally {
      await gw.api('DELETE', `/api/kernels/${id}`);
    }
  });

  it('lets a CPU kernel open neither GPU', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      env: { KERNEL_ACCELERATOR: 'cpu' }
    });
    try {
      expect(await probe(id)).toBe('EPERM EPERM');
    } finally {
      await gw.api('DELETE', `/api/kernels/${id}`);
    }
  });

  it("lets a terminal open its own GPU's device file only", async () => {
    const script = path.join(gw.rootDir, 'probe.py');
    writeFileSync(
      script,
      opens(files).replace(/print\(\*/, "print('probe:', *"),
      { mode: 0o644 }
    );
    const opened = await gw.api('POST', '/api/terminals', {
      accelerator: 'gpu:A100:1'
    });
    expect(opened.status).toBe(200);
    const name: string = opened.body.name;
    const client = await TerminalClient.connect(gw.url, name, gw.token);
    try {
      client.run(`python3 ${script}`);
      const [, seen] = await client.waitFor(/probe: (\S+ \S+)/);
      expect(seen).toBe('EPERM ENXIO');
    } finally {
      client.ws.terminate();
      await gw.api('DELETE', `/api/terminals/${name}`);
    }
  });
});

// The worker alone: a suspended kernel (its devices' state put aside) opens none of them, and one
// resumed on the other GPU opens that one's.
(process.getuid?.() === 0 &&
  existsSync(path.join(DEVICES_CGROUP, 'devices.deny'))
  ? describe
  : describe.skip)('device files of a suspended and resumed kernel', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let dir: string;
  let files: string[];

  beforeAll(async () => {
    ({ dir, files } = makeDeviceFiles());
    rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-device-files-root-'));
    chmodSync(rootDir, 0o711);
    const spec = `gpu:H100:2:checkpoint:node=${dir}/nvidia{n}`;
    gw = await startInProcessGateway({
      rootDir,
      worker: new Worker({
        logger: createLogger('silent'),
        kernelUser: KernelUser.resolve('nobody'),
        devices: parseSimulateSpec(spec),
        deviceFiles: simulatedDeviceFiles(spec),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
  });

  afterAll(async () => {
    await gw?.close();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
    expect(devicesCgroupsOf(process.pid)).toEqual([]);
  });

  it('denies both while suspended and the other after resuming there', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      env: { KERNEL_ACCELERATOR: 'gpu:H100:1' }
    });
    const socket = await KernelSocket.connect(gw, id);
    const probe = async () => {
      const run = await socket.execute(opens(files));
      expect(run.stderr).toBe('');
      return run.stdout.trim();
    };
    try {
      const held = (await gw.api('GET', `/api/kernels/${id}`)).body.accelerator
        .devices[0].id as string;
      const [own, other] =
        held === 'sim-gpu-0'
          ? ['ENXIO EPERM', 'EPERM ENXIO']
          : ['EPERM ENXIO', 'ENXIO EPERM'];
      expect(await probe()).toBe(own);
      await gw.worker.suspendKernel(id);
      expect(await probe()).toBe('EPERM EPERM');
      await gw.worker.resumeKernel(id, [
        held === 'sim-gpu-0' ? 'sim-gpu-1' : 'sim-gpu-0'
      ]);
      expect(await probe()).toBe(other);
    } finally {
      await socket.close();
      await gw.api('DELETE', `/api/kernels/${id}`);
    }
  });
});

/** What the NVIDIA driver writes in `/proc/driver/nvidia/gpus/<PCI address>/information`. */
function information(uuid: string, bus: string, minor: number): string {
  return [
    'Model: \t\t NVIDIA A100-SXM4-40GB',
    'IRQ:   \t\t 148',
    `GPU UUID: \t ${uuid}`,
    'Video BIOS: \t 92.00.45.00.03',
    'Bus Type: \t PCIe',
    'DMA Size: \t 47 bits',
    'DMA Mask: \t 0x7fffffffffff',
    `Bus Location: \t ${bus}`,
    `Device Minor: \t ${minor}`,
    'GPU Excluded:\t No',
    ''
  ].join('\n');
}

describe('the device files discovery finds', () => {
  let root: string;

  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'ferry-device-sysfs-'));
  });

  afterEach(() => {
    rmSync(root, { recursive: true, force: true });
  });

  it("gives each NVIDIA GPU its driver's minor, and a MIG instance its GPU's", async () => {
    const fixtures = path.join(__dirname, 'fixtures', 'devices');
    const devices = nvidiaDevices(
      parseNvidiaGpuCsv(
        readFileSync(path.join(fixtures, 'nvidia-smi-a100-mig.csv'), 'utf8')
      ),
      parseNvidiaList(
        readFileSync(path.join(fixtures, 'nvidia-smi-L-mig.txt'), 'utf8')
      )
    );
    // Minors in another order than nvidia-smi's indices; GPU 2's folder is unreadable.
    const gpus: [string, string, number][] = [
      ['GPU-6c1f0d2a-93b4-1e7c-58a2-f0d4c9b7e318', '0000:07:00.0', 2],
      ['GPU-e2a95d17-0c4b-8f63-7d1e-3b80a6c5f294', '0000:0f:00.0', 0]
    ];
    for (const [uuid, bus, minor] of gpus) {
      mkdirSync(path.join(root, bus));
      writeFileSync(
        path.join(root, bus, 'information'),
        information(uuid, bus, minor)
      );
    }
    mkdirSync(path.join(root, '0000:47:00.0'));
    expect(parseNvidiaInformation(information(...gpus[0]))).toEqual({
      uuid: gpus[0][0],
      minor: 2
    });
    const files = await nvidiaDeviceFiles(devices, root);
    const migs = devices.filter(d => d.parentId === gpus[0][0]);
    expect(migs).toHaveLength(4);
    expect(files).toEqual({
      ...Object.fromEntries(migs.map(d => [d.id, ['/dev/nvidia2']])),
      [gpus[1][0]]: ['/dev/nvidia0']
    });
  });

  it('gives an AMD GPU its DRM card and render node, a TPU chip its accel node or vfio group', async () => {
    const drm = path.join(root, 'drm');
    mkdirSync(path.join(drm, 'card1', 'device', 'drm', 'renderD129'), {
      recursive: true
    });
    mkdirSync(path.join(drm, 'card1', 'device', 'drm', 'card1'));
    const amd = { id: 'amd-1', visibleId: '1', labels: {} } as IDevice;
    const lost = { id: 'amd-2', visibleId: '2', labels: {} } as IDevice;
    expect(await rocmDeviceFiles([amd, lost], drm)).toEqual({
      'amd-1': ['/dev/dri/card1', '/dev/dri/renderD129']
    });

    const pci = path.join(root, 'pci');
    mkdirSync(path.join(pci, '0000:00:04.0', 'accel', 'accel0'), {
      recursive: true
    });
    mkdirSync(path.join(pci, '0000:00:05.0'), { recursive: true });
    symlinkSync(
      '../../../bus/pci/drivers/vfio-pci',
      path.join(pci, '0000:00:05.0', 'driver')
    );
    symlinkSync(
      '../../../kernel/iommu_groups/12',
      path.join(pci, '0000:00:05.0', 'iommu_group')
    );
    const chip = (id: string, address: string) =>
      ({ id, labels: { pci: address } }) as unknown as IDevice;
    expect(
      await tpuDeviceFiles(
        [chip('tpu-0', '0000:00:04.0'), chip('tpu-1', '0000:00:05.0')],
        pci
      )
    ).toEqual({ 'tpu-0': ['/dev/accel0'], 'tpu-1': ['/dev/vfio/12'] });
  });
});

// What the start-up line says where device files cannot be kept apart (cgroups need root here).
(process.getuid?.() === 0 &&
  existsSync(path.join(DEVICES_CGROUP, 'devices.deny'))
  ? describe
  : describe.skip)('the start-up line on device files', () => {
  it('says accelerators are apart by environment only without a devices hierarchy or file', async () => {
    const logger = createLogger('silent');
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-device-mounts-'));
    try {
      // This host's mounts less the devices hierarchy.
      const mountinfo = path.join(dir, 'mountinfo');
      writeFileSync(
        mountinfo,
        readFileSync('/proc/self/mountinfo', 'utf8')
          .split('\n')
          .filter(line => !line.includes(DEVICES_CGROUP))
          .join('\n')
      );
      const without = ProcessLimits.detect({
        logger,
        mountinfo,
        deviceFiles: { 'sim-gpu-0': ['/dev/null'] }
      });
      const unknown = ProcessLimits.detect({
        logger,
        deviceFiles: { 'sim-gpu-0': [], 'sim-gpu-1': [dir] }
      });
      const none = ProcessLimits.detect({ logger });
      try {
        expect(without.devicesApart).toEqual({
          enforced: false,
          text: expect.any(String)
        });
        expect(without.describe()).toContain(
          'accelerators are kept apart by environment only (CUDA_VISIBLE_DEVICES and its like), which kernel code can change: no cgroup v1 devices hierarchy'
        );
        expect(unknown.describe()).toContain(
          `by environment only (CUDA_VISIBLE_DEVICES and its like), which kernel code can change: sim-gpu-0 (no device file known), sim-gpu-1 (${dir} is not a device file)`
        );
        expect(none.devicesApart).toBeUndefined();
        expect(none.describe()).not.toContain('accelerators');
      } finally {
        await without.dispose();
        await unknown.dispose();
        await none.dispose();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
