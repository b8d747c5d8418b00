import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  DeviceToolError,
  DeviceToolMissingError,
  MIB,
  NVIDIA_APP_FIELDS,
  NVIDIA_GPU_FIELDS,
  NvidiaDeviceSource,
  nvidiaDevices,
  nvidiaModel,
  nvidiaSamples,
  parseNvidiaAppsCsv,
  parseNvidiaGpuCsv,
  parseNvidiaList
} from '../src/agent/devices';

const FIXTURES = path.join(__dirname, 'fixtures', 'devices');
const TIME = '2025-01-20T01:36:56.000Z';

function fixture(name: string): string {
  return readFileSync(path.join(FIXTURES, name), 'utf8');
}

const H100_0 = 'GPU-3f2a9c1e-8b7d-4e60-a1f5-2c9d0e7b6a41';
const H100_1 = 'GPU-b81d4e07-25c6-4f3a-9e8b-7a0c5d1f2e93';
const H200 = 'GPU-8be40d03-ad95-7082-878f-31e2874dc2f5';
const H200_BUSY = 'GPU-f7b722b8-12a8-ddb5-9ef6-49c4c16bf8e4';
const A100_MIG = 'GPU-6c1f0d2a-93b4-1e7c-58a2-f0d4c9b7e318';
const A100_WHOLE = 'GPU-e2a95d17-0c4b-8f63-7d1e-3b80a6c5f294';
const A100_MIG_NO_INSTANCES = 'GPU-41c7b0e8-5f2d-a936-1e4c-d8f2b7a05e61';

describe('nvidia-smi GPU query', () => {
  it('reads two H100s: model, product name, UUID as the CUDA_VISIBLE_DEVICES value, memory in bytes', () => {
    const gpus = parseNvidiaGpuCsv(fixture('nvidia-smi-h100x2.csv'));
    const devices = nvidiaDevices(gpus, []);
    expect(devices).toEqual([
      {
        id: H100_0,
        kind: 'gpu',
        vendor: 'nvidia',
        model: 'H100',
        name: 'NVIDIA H100 80GB HBM3',
        visibleId: H100_0,
        memoryBytes: 81559 * MIB,
        labels: {},
        simulated: false
      },
      expect.objectContaining({ id: H100_1, model: 'H100' })
    ]);
  });

  it('samples every measurement, memory in bytes, and a known 0 stays 0', () => {
    const gpus = parseNvidiaGpuCsv(fixture('nvidia-smi-h100x2.csv'));
    const devices = nvidiaDevices(gpus, []);
    const [busy, idle] = nvidiaSamples(devices, gpus, [], TIME);
    expect(busy).toEqual({
      deviceId: H100_0,
      time: TIME,
      utilizationPercent: 97,
      memoryUsedBytes: 62314 * MIB,
      memoryTotalBytes: 81559 * MIB,
      temperatureC: 61,
      powerW: 598.42,
      powerLimitW: 700,
      smClockMHz: 1980,
      memoryClockMHz: 2619,
      eccUncorrected: 0,
      processes: []
    });
    expect(idle.utilizationPercent).toBe(0);
    expect(idle.memoryUsedBytes).toBe(1 * MIB);
  });

  it('leaves [N/A] power and ECC of a T4 unknown, never 0', () => {
    const gpus = parseNvidiaGpuCsv(fixture('nvidia-smi-t4-na.csv'));
    expect(gpus).toHaveLength(1);
    const devices = nvidiaDevices(gpus, []);
    expect(devices[0]).toMatchObject({
      model: 'T4',
      name: 'Tesla T4',
      memoryBytes: 15360 * MIB
    });
    const [sample] = nvidiaSamples(devices, gpus, undefined, TIME);
    expect('powerW' in sample).toBe(false);
    expect('eccUncorrected' in sample).toBe(false);
    expect(sample.powerLimitW).toBe(70);
    expect(sample.temperatureC).toBe(38);
    // The process query failed: which processes run is unknown, not "none".
    expect('processes' in sample).toBe(false);
    expect(JSON.parse(JSON.stringify(sample))).toEqual(sample);
  });

  it('names consumer and data-centre cards by their short model; ECC [N/A] on a GeForce is unknown', () => {
    const gpus = parseNvidiaGpuCsv(fixture('nvidia-smi-rtx4090-l4.csv'));
    expect(gpus.map(gpu => nvidiaModel(gpu.name))).toEqual(['RTX 4090', 'L4']);
    expect(gpus[0].eccUncorrected).toBeUndefined();
    expect(gpus[0].migEnabled).toBeUndefined();
    expect(gpus[1].eccUncorrected).toBe(0);
    expect(gpus[1].memoryTotalBytes).toBe(23034 * MIB);
  });

  it.each([
    ['NVIDIA H100 80GB HBM3', 'H100'],
    ['NVIDIA H100 PCIe', 'H100'],
    ['Tesla T4', 'T4'],
    ['NVIDIA A100-SXM4-40GB', 'A100'],
    ['NVIDIA A100 80GB PCIe', 'A100'],
    ['A100-SXM4-40GB', 'A100'],
    ['Tesla V100-SXM2-16GB', 'V100'],
    ['NVIDIA GeForce RTX 4090', 'RTX 4090'],
    ['NVIDIA GeForce GTX 1080 Ti', 'GTX 1080 Ti'],
    ['NVIDIA L4', 'L4'],
    ['NVIDIA L40S', 'L40S'],
    ['NVIDIA A10G', 'A10G'],
    ['NVIDIA RTX A6000', 'RTX A6000'],
    ['NVIDIA RTX 6000 Ada Generation', 'RTX 6000 Ada'],
    ['Quadro RTX 8000', 'RTX 8000'],
    ['NVIDIA GH200 480GB', 'GH200']
  ])('short model of %s is %s', (name, model) => {
    expect(nvidiaModel(name)).toBe(model);
  });

  it('keeps a product name that holds a comma whole', () => {
    const [gpu] = parseNvidiaGpuCsv(
      '0, GPU-0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f, Acme, Rev 2, 5, 1, 100, 1024, 40, 20.5, 75.00, 1000, 2000, 0, [N/A]\n'
    );
    expect(gpu.name).toBe('Acme, Rev 2');
    expect(gpu.utilizationPercent).toBe(5);
    expect(gpu.migEnabled).toBeUndefined();
  });
});

describe('nvidia-smi compute apps', () => {
  it('lists processes per GPU with memory in bytes; [N/A] memory stays unknown', () => {
    const apps = parseNvidiaAppsCsv(fixture('compute-apps.csv'));
    expect(apps).toEqual([
      { pid: 48211, gpuUuid: H100_0, memoryBytes: 61440 * MIB },
      { pid: 48377, gpuUuid: H100_0, memoryBytes: 812 * MIB },
      { pid: 51902, gpuUuid: H100_1 }
    ]);
    const gpus = parseNvidiaGpuCsv(fixture('nvidia-smi-h100x2.csv'));
    const samples = nvidiaSamples(nvidiaDevices(gpus, []), gpus, apps, TIME);
    expect(samples.map(s => s.processes)).toEqual([
      [
        { pid: 48211, memoryBytes: 61440 * MIB },
        { pid: 48377, memoryBytes: 812 * MIB }
      ],
      [{ pid: 51902 }]
    ]);
  });

  it('reads no processes from empty output', () => {
    expect(parseNvidiaAppsCsv('')).toEqual([]);
  });
});

describe('MIG', () => {
  const gpus = parseNvidiaGpuCsv(fixture('nvidia-smi-a100-mig.csv'));
  const listed = parseNvidiaList(fixture('nvidia-smi-L-mig.txt'));

  it('reads nvidia-smi -L: GPUs and the MIG instances under each', () => {
    expect(listed.map(gpu => [gpu.index, gpu.name, gpu.uuid])).toEqual([
      [0, 'NVIDIA A100-SXM4-40GB', A100_MIG],
      [1, 'NVIDIA A100-SXM4-40GB', A100_WHOLE],
      [2, 'NVIDIA A100-SXM4-40GB', A100_MIG_NO_INSTANCES]
    ]);
    expect(listed[0].migInstances).toEqual([
      {
        profile: '3g.20gb',
        index: 0,
        uuid: 'MIG-0a7e3c95-4d1b-5f82-9c6e-b13f8a2d4e70'
      },
      {
        profile: '2g.10gb',
        index: 1,
        uuid: 'MIG-5c92e1f4-a806-5b3d-8e17-4f6ad09c2b85'
      },
      {
        profile: '1g.5gb',
        index: 2,
        uuid: 'MIG-d4b08f6e-2c35-5a91-b7e0-91c5f3a86d2b'
      },
      {
        profile: '1g.5gb',
        index: 3,
        uuid: 'MIG-7f1e5a0c-b94d-5e26-a3c8-60d2e7b419f3'
      }
    ]);
    expect(listed[1].migInstances).toEqual([]);
  });

  it('offers each MIG instance as a device with its profile, and not the GPU it lives on', () => {
    const devices = nvidiaDevices(gpus, listed);
    expect(devices.map(d => d.id)).toEqual([
      'MIG-0a7e3c95-4d1b-5f82-9c6e-b13f8a2d4e70',
      'MIG-5c92e1f4-a806-5b3d-8e17-4f6ad09c2b85',
      'MIG-d4b08f6e-2c35-5a91-b7e0-91c5f3a86d2b',
      'MIG-7f1e5a0c-b94d-5e26-a3c8-60d2e7b419f3',
      // GPU 1 is not in MIG mode; GPU 2 is, with no instance: CUDA could use neither it nor a part.
      A100_WHOLE
    ]);
    expect(devices[2]).toEqual({
      id: 'MIG-d4b08f6e-2c35-5a91-b7e0-91c5f3a86d2b',
      kind: 'gpu',
      vendor: 'nvidia',
      model: 'A100',
      name: 'NVIDIA A100-SXM4-40GB MIG 1g.5gb',
      visibleId: 'MIG-d4b08f6e-2c35-5a91-b7e0-91c5f3a86d2b',
      profile: '1g.5gb',
      parentId: A100_MIG,
      labels: { mig: '1g.5gb' },
      simulated: false
    });
    expect(devices[4]).toMatchObject({
      model: 'A100',
      memoryBytes: 40960 * MIB
    });
  });

  it('samples a MIG instance with its GPU temperature only, saying why the rest is unknown', () => {
    const devices = nvidiaDevices(gpus, listed);
    const samples = nvidiaSamples(devices, gpus, [], TIME);
    expect(samples[0]).toEqual({
      deviceId: 'MIG-0a7e3c95-4d1b-5f82-9c6e-b13f8a2d4e70',
      time: TIME,
      temperatureC: 33,
      note: expect.stringContaining('MIG instance')
    });
    expect(samples[4]).toMatchObject({
      deviceId: A100_WHOLE,
      utilizationPercent: 0,
      powerW: 55.02
    });
  });

  it('reads the MIG-GPU-<uuid>/<gi>/<ci> names of drivers before R470', () => {
    const old = parseNvidiaList(fixture('nvidia-smi-L-mig-r460.txt'));
    expect(old[0].name).toBe('A100-SXM4-40GB');
    expect(old[0].migInstances.map(mig => mig.uuid)).toEqual([
      'MIG-GPU-9b3e71c0-4a2f-d58e-06b1-c7f2e4a19d35/7/0',
      'MIG-GPU-9b3e71c0-4a2f-d58e-06b1-c7f2e4a19d35/8/0'
    ]);
  });
});

describe('NvidiaDeviceSource', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-nvidia-'));
  });

  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** An executable standing in for nvidia-smi: prints a recorded output for the exact arguments. */
  async function fakeNvidiaSmi(
    name: string,
    outputs: { gpus: string; list: string; apps: string }
  ): Promise<string> {
    const file = path.join(dir, name);
    const gpuQuery = `--query-gpu=${NVIDIA_GPU_FIELDS.join(',')}`;
    const appQuery = `--query-compute-apps=${NVIDIA_APP_FIELDS.join(',')}`;
    await fs.writeFile(
      file,
      [
        '#!/bin/sh',
        `if [ "$1" = "-L" ]; then cat '${path.join(FIXTURES, outputs.list)}'; exit 0; fi`,
        'if [ "$2" != "--format=csv,noheader,nounits" ]; then echo "bad format: $2" >&2; exit 64; fi',
        `if [ "$1" = "${gpuQuery}" ]; then cat '${path.join(FIXTURES, outputs.gpus)}'; exit 0; fi`,
        `if [ "$1" = "${appQuery}" ]; then cat '${path.join(FIXTURES, outputs.apps)}'; exit 0; fi`,
        'echo "unexpected arguments: $*" >&2',
        'exit 64',
        ''
      ].join('\n'),
      { mode: 0o755 }
    );
    return file;
  }

  it('runs nvidia-smi with the documented queries and turns its output into devices and samples', async () => {
    const command = await fakeNvidiaSmi('nvidia-smi', {
      gpus: 'nvidia-smi-h100x2.csv',
      list: 'nvidia-smi-L-h100x2.txt',
      apps: 'compute-apps.csv'
    });
    const source = new NvidiaDeviceSource({ command });
    const devices = await source.discover();
    expect(devices.map(d => [d.id, d.model])).toEqual([
      [H100_0, 'H100'],
      [H100_1, 'H100']
    ]);
    const samples = await source.sample(devices);
    expect(samples.map(s => s.deviceId)).toEqual([H100_0, H100_1]);
    expect(samples[0].utilizationPercent).toBe(97);
    expect(samples[0].processes).toHaveLength(2);
    expect(Date.parse(samples[0].time)).not.toBeNaN();
  });

  it('reads a real H200, recorded on a lent GPU machine while a torch process held memory', async () => {
    // nvidia-smi 580.159 on one NVIDIA H200 (driver 580.159.04), recorded 2026-11-27 by the device
    // check: PyTorch, started from a Ferry kernel, held two 3 GiB tensors there (pid 543).
    const command = await fakeNvidiaSmi('nvidia-smi-h200', {
      gpus: 'nvidia-smi-h200.csv',
      list: 'nvidia-smi-L-h200.txt',
      apps: 'compute-apps-h200.csv'
    });
    const source = new NvidiaDeviceSource({ command });
    const devices = await source.discover();
    expect(devices).toEqual([
      {
        id: H200,
        kind: 'gpu',
        vendor: 'nvidia',
        model: 'H200',
        name: 'NVIDIA H200',
        visibleId: H200,
        memoryBytes: 143771 * MIB,
        labels: {},
        simulated: false
      }
    ]);
    const [sample] = await source.sample(devices);
    expect(sample).toMatchObject({
      deviceId: H200,
      utilizationPercent: 0,
      memoryUsedBytes: 6763 * MIB,
      memoryTotalBytes: 143771 * MIB,
      temperatureC: 42,
      powerW: 121.3,
      powerLimitW: 700,
      smClockMHz: 1980,
      memoryClockMHz: 3201,
      eccUncorrected: 0,
      processes: [{ pid: 543, memoryBytes: 6754 * MIB }]
    });
  });

  it('reads a real H200 at full load, recorded while a bf16 matmul loop ran', async () => {
    // nvidia-smi 580.159 on another NVIDIA H200 (driver 580.159.04, Firecracker), recorded
    // 2026-11-28 by bench/gpu/probe.sh: a torch process (pid 494) ran 8192^3 bf16 matmuls in a loop
    // and held 6 GiB besides; the GPU read 100 % busy at 688 W of 700 with the SM clock at 1455 MHz.
    const command = await fakeNvidiaSmi('nvidia-smi-h200-busy', {
      gpus: 'nvidia-smi-h200-busy.csv',
      list: 'nvidia-smi-L-h200-busy.txt',
      apps: 'compute-apps-h200-busy.csv'
    });
    const source = new NvidiaDeviceSource({ command });
    const devices = await source.discover();
    expect(devices.map(d => [d.id, d.model, d.memoryBytes])).toEqual([
      [H200_BUSY, 'H200', 143771 * MIB]
    ]);
    const [sample] = await source.sample(devices);
    expect(sample).toMatchObject({
      deviceId: H200_BUSY,
      utilizationPercent: 100,
      memoryUsedBytes: 7027 * MIB,
      temperatureC: 57,
      powerW: 688.41,
      powerLimitW: 700,
      smClockMHz: 1455,
      memoryClockMHz: 3201,
      processes: [{ pid: 494, memoryBytes: 7018 * MIB }]
    });
  });

  it('finds MIG instances through nvidia-smi -L', async () => {
    const command = await fakeNvidiaSmi('nvidia-smi-mig', {
      gpus: 'nvidia-smi-a100-mig.csv',
      list: 'nvidia-smi-L-mig.txt',
      apps: 'compute-apps.csv'
    });
    const devices = await new NvidiaDeviceSource({ command }).discover();
    expect(devices.map(d => d.labels.mig ?? d.model)).toEqual([
      '3g.20gb',
      '2g.10gb',
      '1g.5gb',
      '1g.5gb',
      'A100'
    ]);
  });

  it('says the tool is missing when nvidia-smi is not installed', async () => {
    const source = new NvidiaDeviceSource({
      command: path.join(dir, 'not-installed', 'nvidia-smi')
    });
    await expect(source.discover()).rejects.toBeInstanceOf(
      DeviceToolMissingError
    );
  });

  it("reports nvidia-smi's own explanation when it fails", async () => {
    const command = path.join(dir, 'nvidia-smi-no-driver');
    await fs.writeFile(
      command,
      '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9\n',
      { mode: 0o755 }
    );
    const failure = new NvidiaDeviceSource({ command }).discover();
    await expect(failure).rejects.toBeInstanceOf(DeviceToolError);
    await expect(failure).rejects.toThrow(
      /exit status 9: NVIDIA-SMI has failed because it couldn't communicate/
    );
  });
});
