import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  amdModel,
  DeviceToolMissingError,
  parseRocmSmiJson,
  ROCM_SMI_ARGS,
  RocmDeviceSource,
  rocmDevices,
  rocmSamples
} from '../src/agent/devices';

const FIXTURES = path.join(__dirname, 'fixtures', 'devices');
const TIME = '2025-03-04T10:00:00.000Z';

function fixture(name: string): string {
  return readFileSync(path.join(FIXTURES, name), 'utf8');
}

describe('rocm-smi --json', () => {
  it('reads MI300X cards (ROCm 6 key names): model, memory in bytes, index as the visible id', () => {
    const cards = parseRocmSmiJson(fixture('rocm-smi-mi300x.txt'));
    const devices = rocmDevices(cards);
    expect(devices).toEqual([
      {
        id: 'amd-0',
        kind: 'gpu',
        vendor: 'amd',
        model: 'MI300X',
        name: 'AMD Instinct MI300X OAM',
        visibleId: '0',
        memoryBytes: 205822885888,
        labels: { uniqueId: '0x18e1c4a25b7d3f09' },
        simulated: false
      },
      expect.objectContaining({ id: 'amd-1', visibleId: '1', model: 'MI300X' })
    ]);
  });

  it('samples an MI300X: junction temperature where the edge sensor is N/A, socket power', () => {
    const cards = parseRocmSmiJson(fixture('rocm-smi-mi300x.txt'));
    const [idle, busy] = rocmSamples(rocmDevices(cards), cards, TIME);
    expect(idle).toEqual({
      deviceId: 'amd-0',
      time: TIME,
      utilizationPercent: 0,
      memoryUsedBytes: 295370752,
      memoryTotalBytes: 205822885888,
      temperatureC: 41,
      powerW: 139
    });
    expect(busy).toMatchObject({
      utilizationPercent: 100,
      memoryUsedBytes: 171798691840,
      powerW: 604
    });
  });

  it('reads MI250X cards with ROCm 5 key names; a die without its own power reading stays unknown', () => {
    const cards = parseRocmSmiJson(fixture('rocm-smi-mi250x-rocm5.txt'));
    const devices = rocmDevices(cards);
    expect(devices.map(d => [d.model, d.name, d.memoryBytes])).toEqual([
      ['MI250X', 'Aldebaran/MI200 [Instinct MI250X/MI250]', 68702699520],
      ['MI250X', 'Aldebaran/MI200 [Instinct MI250X/MI250]', 68702699520]
    ]);
    const [first, second] = rocmSamples(devices, cards, TIME);
    expect(first).toMatchObject({ powerW: 92, temperatureC: 38 });
    expect('powerW' in second).toBe(false);
    expect(second.utilizationPercent).toBe(12);
  });

  it('finds the JSON among warnings and refuses output without any', () => {
    const text = `WARNING: something the tool wanted to say\n${fixture('rocm-smi-mi300x.txt')}`;
    expect(parseRocmSmiJson(text)).toHaveLength(2);
    expect(() => parseRocmSmiJson('ERROR: no GPUs\n')).toThrow(
      'rocm-smi printed no JSON'
    );
  });

  it.each([
    ['AMD Instinct MI300X OAM', 'MI300X'],
    ['AMD Instinct MI300X', 'MI300X'],
    ['Aldebaran/MI200 [Instinct MI250X/MI250]', 'MI250X'],
    ['Arcturus GL-XL [Instinct MI100]', 'MI100'],
    ['AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2', 'MI200'],
    ['Radeon RX 7900 XT', 'RX 7900 XT'],
    ['Navi 31 [Radeon RX 7900 XT/7900 XTX]', 'RX 7900 XT'],
    ['AMD Radeon Pro W7900', 'W7900'],
    ['Phoenix3', 'Phoenix3']
  ])('short model of %s is %s', (name, model) => {
    expect(amdModel(name)).toBe(model);
  });
});

describe('RocmDeviceSource', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-rocm-'));
  });

  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('uses what rocm-smi printed even when it exits non-zero for an unsupported query', async () => {
    const command = path.join(dir, 'rocm-smi');
    await fs.writeFile(
      command,
      [
        '#!/bin/sh',
        `if [ "$*" != "${ROCM_SMI_ARGS.join(' ')}" ]; then echo "unexpected arguments: $*" >&2; exit 64; fi`,
        `cat '${path.join(FIXTURES, 'rocm-smi-mi250x-rocm5.txt')}'`,
        'exit 2',
        ''
      ].join('\n'),
      { mode: 0o755 }
    );
    const source = new RocmDeviceSource({ command });
    const devices = await source.discover();
    expect(devices.map(d => d.id)).toEqual(['amd-0', 'amd-1']);
    const samples = await source.sample(devices);
    expect(samples.map(s => s.temperatureC)).toEqual([38, 36]);
  });

  it('says the tool is missing when rocm-smi is not installed', async () => {
    const source = new RocmDeviceSource({
      command: path.join(dir, 'not-installed', 'rocm-smi')
    });
    await expect(source.discover()).rejects.toBeInstanceOf(
      DeviceToolMissingError
    );
  });
});
