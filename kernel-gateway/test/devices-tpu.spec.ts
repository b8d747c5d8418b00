import { promises as fs } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  GIB,
  NO_TPU_WORKLOAD,
  scanTpuChips,
  TPU_METRIC_NAMES,
  TpuDeviceSource,
  tpuGeneration,
  TpuMetricsClient
} from '../src/agent/devices';

const PROTO = path.join(
  __dirname,
  '..',
  '..',
  'schema',
  'tpu-runtime-metrics.proto'
);

/** A PCI device as sysfs shows it. */
interface IPciDevice {
  address: string;
  vendor: string;
  device: string;
  subsystemDevice?: string;
}

/**
 * A sysfs tree as Linux lays it out: `bus/pci/devices/<address>` links to
 * `devices/pci0000:00/<address>`, which holds `vendor`, `device` and `subsystem_device`.
 */
async function pciTree(root: string, devices: IPciDevice[]): Promise<string> {
  const bus = path.join(root, 'bus', 'pci', 'devices');
  await fs.mkdir(bus, { recursive: true });
  for (const device of devices) {
    const dir = path.join(root, 'devices', 'pci0000:00', device.address);
    await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(path.join(dir, 'vendor'), `${device.vendor}\n`);
    await fs.writeFile(path.join(dir, 'device'), `${device.device}\n`);
    await fs.writeFile(
      path.join(dir, 'subsystem_device'),
      `${device.subsystemDevice ?? '0x0000'}\n`
    );
    await fs.symlink(
      path.join('..', '..', '..', 'devices', 'pci0000:00', device.address),
      path.join(bus, device.address)
    );
  }
  return bus;
}

/** Values of one metric, one per libtpu device id. */
type MetricValues = { int: number } | { double: number };

/**
 * A gRPC server implementing libtpu's `RuntimeMetricService` on a loopback port, answering each
 * metric name with the given values (or with `error`).
 */
async function startMetricsServer(
  answer: (
    metricName: string
  ) => MetricValues[] | { attributes: grpc.ServiceError },
  port = 0
): Promise<{ address: string; server: grpc.Server }> {
  const loaded = grpc.loadPackageDefinition(
    protoLoader.loadSync(PROTO, { keepCase: true, longs: Number })
  ) as unknown as {
    tpu: {
      monitoring: {
        runtime: { RuntimeMetricService: grpc.ServiceClientConstructor };
      };
    };
  };
  const server = new grpc.Server();
  server.addService(
    loaded.tpu.monitoring.runtime.RuntimeMetricService.service,
    {
      GetRuntimeMetric: (
        call: grpc.ServerUnaryCall<{ metric_name: string }, unknown>,
        callback: grpc.sendUnaryData<unknown>
      ) => {
        const name = call.request.metric_name;
        const values = answer(name);
        if ('attributes' in values) {
          callback(values.attributes);
          return;
        }
        callback(null, {
          metric: {
            name,
            metrics: values.map((value, i) => ({
              attribute: { key: 'device-id', value: { int_attr: i } },
              gauge:
                'int' in value
                  ? { as_int: value.int }
                  : { as_double: value.double }
            }))
          }
        });
      }
    }
  );
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      `127.0.0.1:${port}`,
      grpc.ServerCredentials.createInsecure(),
      (error, actual) => (error ? reject(error) : resolve(actual))
    )
  );
  return { address: `127.0.0.1:${bound}`, server };
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>(resolve => server.close(() => resolve()));
  return port;
}

const V5E_HBM_REPORTED = 17044078592;

let tmp: string;
const servers: grpc.Server[] = [];
const sources: TpuDeviceSource[] = [];

beforeEach(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-tpu-'));
});

afterEach(async () => {
  sources.splice(0).forEach(source => source.dispose());
  servers.splice(0).forEach(server => server.forceShutdown());
  await fs.rm(tmp, { recursive: true, force: true });
});

/** Four v5e chips, listed out of address order, beside a gVNIC, an Intel bridge and an NVIDIA GPU. */
function v5eHost(): IPciDevice[] {
  return [
    { address: '0000:00:10.0', vendor: '0x1ae0', device: '0x0063' },
    { address: '0000:00:01.0', vendor: '0x8086', device: '0x7110' },
    { address: '0000:00:04.0', vendor: '0x1ae0', device: '0x0063' },
    { address: '0000:00:03.0', vendor: '0x1ae0', device: '0x0042' },
    { address: '0000:00:0f.0', vendor: '0x1ae0', device: '0x0063' },
    { address: '0000:00:1e.0', vendor: '0x10de', device: '0x20b0' },
    { address: '0000:00:05.0', vendor: '0x1ae0', device: '0x0063' }
  ];
}

describe('TPU discovery on the PCI bus', () => {
  it.each([
    ['0x005e', undefined, 'v4', 32],
    ['0x0063', undefined, 'v5e', 16],
    ['0x0062', undefined, 'v5p', 95],
    ['0x006f', undefined, 'v6e', 32],
    ['0x0027', '0x004e', 'v2', 16],
    ['0x0027', '0x004f', 'v3', 32]
  ])(
    'device %s (subsystem %s) is a TPU %s with %d GiB HBM per chip',
    (device, subsystem, model, gib) => {
      expect(tpuGeneration(device, subsystem)).toMatchObject({
        model,
        hbmBytes: gib * GIB
      });
    }
  );

  it('does not take other Google devices (gVNIC) or an unknown v2/v3 variant for a TPU', () => {
    expect(tpuGeneration('0x0042')).toBeUndefined();
    expect(tpuGeneration('0x0027', '0x0000')).toBeUndefined();
  });

  it('finds the chips under vendor 0x1ae0, numbered in PCI address order', async () => {
    const root = await pciTree(tmp, v5eHost());
    const source = new TpuDeviceSource({ sysfsRoot: root });
    const devices = await source.discover();
    expect(devices).toEqual(
      ['0000:00:04.0', '0000:00:05.0', '0000:00:0f.0', '0000:00:10.0'].map(
        (pci, n) => ({
          id: `tpu-${n}`,
          kind: 'tpu',
          vendor: 'google',
          model: 'v5e',
          name: 'TPU v5e',
          visibleId: String(n),
          memoryBytes: 16 * GIB,
          labels: { pci },
          simulated: false
        })
      )
    );
  });

  it('tells v2 from v3 by the subsystem id', async () => {
    const root = await pciTree(tmp, [
      {
        address: '0000:00:05.0',
        vendor: '0x1ae0',
        device: '0x0027',
        subsystemDevice: '0x004f'
      }
    ]);
    const [chip] = await scanTpuChips(root);
    expect(chip.generation.model).toBe('v3');
  });

  it('rejects with ENOENT on a host without a PCI folder', async () => {
    await expect(
      scanTpuChips(path.join(tmp, 'no-such-folder'))
    ).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('TPU runtime metrics', () => {
  it('shows "no TPU workload yet" and nothing measured while libtpu does not answer', async () => {
    const root = await pciTree(tmp, v5eHost());
    const source = new TpuDeviceSource({
      sysfsRoot: root,
      metricsAddress: `127.0.0.1:${await closedPort()}`
    });
    sources.push(source);
    const devices = await source.discover();
    const samples = await source.sample(devices);
    expect(samples).toHaveLength(4);
    for (const sample of samples) {
      expect(Object.keys(sample).sort()).toEqual(['deviceId', 'note', 'time']);
      expect(sample.note).toBe(NO_TPU_WORKLOAD);
    }
    expect(NO_TPU_WORKLOAD).toBe('no TPU workload yet');
  });

  it('shows the metrics on the next sample once a workload starts serving them', async () => {
    const port = await closedPort();
    const root = await pciTree(tmp, v5eHost());
    const source = new TpuDeviceSource({
      sysfsRoot: root,
      metricsAddress: `127.0.0.1:${port}`
    });
    sources.push(source);
    const devices = await source.discover();
    const before = await source.sample(devices);
    expect(before[0].note).toBe(NO_TPU_WORKLOAD);
    const { server } = await startMetricsServer(
      name =>
        name === TPU_METRIC_NAMES.dutyCycle
          ? [{ double: 42 }]
          : [{ int: V5E_HBM_REPORTED }],
      port
    );
    servers.push(server);
    const after = await source.sample(devices);
    expect(after[0]).toMatchObject({
      utilizationPercent: 42,
      memoryTotalBytes: V5E_HBM_REPORTED
    });
    expect('note' in after[0]).toBe(false);
    // Chips the workload's metrics do not cover are not claimed idle.
    expect(after[1].note).toBe('no TPU runtime metrics for this chip');
    expect('utilizationPercent' in after[1]).toBe(false);
  });

  it("reads each chip's HBM use and duty cycle from a workload's metrics service", async () => {
    const { address, server } = await startMetricsServer(name => {
      switch (name) {
        case TPU_METRIC_NAMES.memoryUsed:
          return [0, 8522039296, 17044078592, 100].map(int => ({ int }));
        case TPU_METRIC_NAMES.memoryTotal:
          return [1, 2, 3, 4].map(() => ({ int: V5E_HBM_REPORTED }));
        default:
          return [0, 25, 50.5, 100].map(double => ({ double }));
      }
    });
    servers.push(server);
    const root = await pciTree(tmp, v5eHost());
    const source = new TpuDeviceSource({
      sysfsRoot: root,
      metricsAddress: address
    });
    sources.push(source);
    const samples = await source.sample(await source.discover());
    expect(samples.map(({ time: _time, ...rest }) => rest)).toEqual([
      {
        deviceId: 'tpu-0',
        utilizationPercent: 0,
        memoryUsedBytes: 0,
        memoryTotalBytes: V5E_HBM_REPORTED
      },
      {
        deviceId: 'tpu-1',
        utilizationPercent: 25,
        memoryUsedBytes: 8522039296,
        memoryTotalBytes: V5E_HBM_REPORTED
      },
      {
        deviceId: 'tpu-2',
        utilizationPercent: 50.5,
        memoryUsedBytes: 17044078592,
        memoryTotalBytes: V5E_HBM_REPORTED
      },
      {
        deviceId: 'tpu-3',
        utilizationPercent: 100,
        memoryUsedBytes: 100,
        memoryTotalBytes: V5E_HBM_REPORTED
      }
    ]);
  });

  it('adds up the two TensorCores of a v3 chip; duty cycle comes per chip', async () => {
    const { address, server } = await startMetricsServer(name => {
      switch (name) {
        case TPU_METRIC_NAMES.memoryUsed:
          return [1, 2, 30, 40].map(int => ({ int }));
        case TPU_METRIC_NAMES.memoryTotal:
          return [1, 2, 3, 4].map(() => ({ int: 16 * GIB }));
        default:
          return [10, 90].map(double => ({ double }));
      }
    });
    servers.push(server);
    const root = await pciTree(
      tmp,
      ['0000:00:04.0', '0000:00:05.0'].map(address => ({
        address,
        vendor: '0x1ae0',
        device: '0x0027',
        subsystemDevice: '0x004f'
      }))
    );
    const source = new TpuDeviceSource({
      sysfsRoot: root,
      metricsAddress: address
    });
    sources.push(source);
    const samples = await source.sample(await source.discover());
    expect(samples.map(s => [s.memoryUsedBytes, s.memoryTotalBytes])).toEqual([
      [3, 32 * GIB],
      [70, 32 * GIB]
    ]);
    expect(samples.map(s => s.utilizationPercent)).toEqual([10, 90]);
  });

  it('says why when the service answers with an error', async () => {
    const { address, server } = await startMetricsServer(() => ({
      attributes: Object.assign(new Error('metric not supported'), {
        code: grpc.status.UNIMPLEMENTED,
        details: 'metric not supported',
        metadata: new grpc.Metadata()
      })
    }));
    servers.push(server);
    const root = await pciTree(tmp, v5eHost().slice(0, 3));
    const source = new TpuDeviceSource({
      sysfsRoot: root,
      metricsAddress: address
    });
    sources.push(source);
    const [sample] = await source.sample(await source.discover());
    expect(sample.note).toMatch(
      /^TPU runtime metrics unavailable: .*metric not supported/
    );
    expect('utilizationPercent' in sample).toBe(false);
  });

  it('reads device ordinals given as strings inside a key-value list (newer libtpu)', async () => {
    const loaded = grpc.loadPackageDefinition(
      protoLoader.loadSync(PROTO, { keepCase: true, longs: Number })
    ) as unknown as {
      tpu: {
        monitoring: {
          runtime: { RuntimeMetricService: grpc.ServiceClientConstructor };
        };
      };
    };
    const server = new grpc.Server();
    servers.push(server);
    server.addService(
      loaded.tpu.monitoring.runtime.RuntimeMetricService.service,
      {
        GetRuntimeMetric: (
          _call: grpc.ServerUnaryCall<unknown, unknown>,
          callback: grpc.sendUnaryData<unknown>
        ) =>
          callback(null, {
            metric: {
              name: 'hlo.queue.size.gauge',
              metrics: ['1', '0'].map((ordinal, i) => ({
                attribute: {
                  key: 'attributes',
                  value: {
                    kvlist_attr: {
                      attributes: [
                        { key: 'core_type', value: { string_attr: 'tc' } },
                        {
                          key: 'device_ordinal',
                          value: { string_attr: ordinal }
                        }
                      ]
                    }
                  }
                },
                gauge: { as_int: 7 + i }
              }))
            }
          })
      }
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        '127.0.0.1:0',
        grpc.ServerCredentials.createInsecure(),
        (error, bound) => (error ? reject(error) : resolve(bound))
      )
    );
    const client = new TpuMetricsClient({ address: `127.0.0.1:${port}` });
    try {
      expect(await client.getMetric('hlo.queue.size.gauge')).toEqual([
        { deviceId: 0, value: 8 },
        { deviceId: 1, value: 7 }
      ]);
    } finally {
      client.close();
    }
  });
});
