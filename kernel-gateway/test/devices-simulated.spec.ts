import {
  GIB,
  parseSimulateSpec,
  simulatedDeviceFiles,
  SimulatedDeviceSource,
  SimulateSpecError
} from '../src/agent/devices';

describe('simulated devices', () => {
  it('declares gpu:H100:2,tpu:v5e:4 as two H100s and four v5e chips, all marked simulated', () => {
    const devices = parseSimulateSpec('gpu:H100:2,tpu:v5e:4');
    expect(devices.map(d => [d.id, d.kind, d.model, d.visibleId])).toEqual([
      ['sim-gpu-0', 'gpu', 'H100', '0'],
      ['sim-gpu-1', 'gpu', 'H100', '1'],
      ['sim-tpu-0', 'tpu', 'v5e', '0'],
      ['sim-tpu-1', 'tpu', 'v5e', '1'],
      ['sim-tpu-2', 'tpu', 'v5e', '2'],
      ['sim-tpu-3', 'tpu', 'v5e', '3']
    ]);
    expect(devices[0]).toEqual({
      id: 'sim-gpu-0',
      kind: 'gpu',
      vendor: 'simulated',
      model: 'H100',
      name: 'Simulated H100',
      visibleId: '0',
      memoryBytes: 80 * GIB,
      labels: {},
      simulated: true
    });
    expect(devices[2]).toMatchObject({
      name: 'Simulated TPU v5e',
      memoryBytes: 16 * GIB,
      simulated: true
    });
  });

  it('takes datasheet memory for known models, in any case, and leaves an unknown model without', () => {
    const devices = parseSimulateSpec(
      ' gpu:a100:1 , gpu:t4:1,gpu:L4:1,tpu:V4:1,tpu:v5p:1,tpu:v6e:1,gpu:B300:1'
    );
    expect(devices.map(d => [d.model, d.memoryBytes])).toEqual([
      ['A100', 40 * GIB],
      ['T4', 16 * GIB],
      ['L4', 24 * GIB],
      ['v4', 32 * GIB],
      ['v5p', 95 * GIB],
      ['v6e', 32 * GIB],
      ['B300', undefined]
    ]);
    expect('memoryBytes' in devices[6]).toBe(false);
    // Numbering runs on per kind across entries.
    expect(devices.filter(d => d.kind === 'gpu').map(d => d.id)).toEqual([
      'sim-gpu-0',
      'sim-gpu-1',
      'sim-gpu-2',
      'sim-gpu-3'
    ]);
  });

  it('declares a device file for each device with node=, {n} its number', async () => {
    const spec =
      'gpu:H100:2:checkpoint:node=/tmp/sim/nvidia{n},tpu:v5e:1:node=/tmp/sim/accel';
    expect(simulatedDeviceFiles(spec)).toEqual({
      'sim-gpu-0': ['/tmp/sim/nvidia0'],
      'sim-gpu-1': ['/tmp/sim/nvidia1'],
      'sim-tpu-0': ['/tmp/sim/accel']
    });
    const devices = parseSimulateSpec(spec);
    expect(devices.map(d => [d.id, d.simulated, d.checkpoint])).toEqual([
      ['sim-gpu-0', true, true],
      ['sim-gpu-1', true, true],
      ['sim-tpu-0', true, undefined]
    ]);
    const source = new SimulatedDeviceSource({ spec });
    expect(await source.files()).toEqual(simulatedDeviceFiles(spec));
    expect(simulatedDeviceFiles('gpu:H100:2')).toEqual({});
  });

  it.each([
    ['gpu:H100', /bad simulated devices 'gpu:H100': expected kind:model:count/],
    ['fpga:x:1', /kind must be gpu or tpu, not 'fpga'/],
    ['gpu:H100:0', /count must be a whole number from 1 to 256, not '0'/],
    ['gpu:H100:-1', /count must be a whole number from 1 to 256, not '-1'/],
    ['gpu:H100:1.5', /not '1.5'/],
    ['gpu:H100:two', /not 'two'/],
    ['gpu:H100:100000', /not '100000'/],
    ['gpu::1', /the model is missing/],
    ['gpu:H100:1,', /bad simulated devices '': expected kind:model:count/],
    ['', /the simulated device spec is empty/],
    ['gpu:H100:2:node=/tmp/sim/nvidia', /with \{n\} for the device's number/],
    ['gpu:H100:1:node=sim/nvidia0', /the node must be an absolute path/],
    ['gpu:H100:1:nodes=/tmp/x', /then optionally :checkpoint and :node=<path>/],
    ['gpu:H100:1:checkpoint:checkpoint', /then optionally :checkpoint/]
  ])('refuses %p with a clear message', (spec, message) => {
    expect(() => parseSimulateSpec(spec)).toThrow(SimulateSpecError);
    expect(() => parseSimulateSpec(spec)).toThrow(message);
  });

  it('samples only a utilisation derived from the holding kernel: 100 busy, 0 idle or free', async () => {
    const states: Record<string, boolean | undefined> = {
      'sim-gpu-0': true,
      'sim-gpu-1': false
    };
    const source = new SimulatedDeviceSource({
      spec: 'gpu:H100:3',
      busy: id => states[id]
    });
    const devices = await source.discover();
    const samples = await source.sample(devices);
    expect(samples.map(({ time: _time, ...rest }) => rest)).toEqual([
      { deviceId: 'sim-gpu-0', utilizationPercent: 100 },
      { deviceId: 'sim-gpu-1', utilizationPercent: 0 },
      { deviceId: 'sim-gpu-2', utilizationPercent: 0 }
    ]);
    states['sim-gpu-0'] = false;
    states['sim-gpu-2'] = true;
    const next = await source.sample(devices);
    expect(next.map(s => s.utilizationPercent)).toEqual([0, 0, 100]);
  });

  it('samples nothing but time while no busy function is known', async () => {
    const source = new SimulatedDeviceSource({ spec: 'tpu:v5e:1' });
    const [sample] = await source.sample(await source.discover());
    expect(Object.keys(sample).sort()).toEqual(['deviceId', 'time']);
  });
});
