import {
  formatAccelerator,
  formatDevice,
  formatStatus,
  formatWait,
  formatAcceleratorSpec
} from '../src/labels';
import { device } from '@ferry/testing';

describe('labels', () => {
  it('names choices the way the picker shows them', () => {
    expect(formatAccelerator({ kind: 'cpu' })).toBe('CPU');
    expect(formatAccelerator({ kind: 'gpu', model: 'H100', count: 1 })).toBe(
      'GPU · H100 × 1'
    );
    expect(formatAccelerator({ kind: 'gpu', model: 'A100' })).toBe(
      'GPU · A100 × 1'
    );
    expect(formatAccelerator({ kind: 'tpu', model: 'v5e', count: 4 })).toBe(
      'TPU · v5e-4'
    );
    expect(
      formatAccelerator({ kind: 'gpu', model: 'A100', profile: '1g.10gb' })
    ).toBe('GPU · A100 · MIG 1g.10gb');
    expect(
      formatAccelerator(
        { kind: 'gpu', model: 'H100', count: 2 },
        { simulated: true }
      )
    ).toBe('GPU · H100 × 2 (simulated)');
  });

  it('names a kernel by where its request stands', () => {
    expect(formatStatus(undefined)).toBe('CPU');
    expect(
      formatStatus({ kind: 'gpu', model: 'H100', state: 'queued', position: 2 })
    ).toBe('Queued · #2');
    expect(
      formatStatus({
        kind: 'gpu',
        state: 'queued',
        offer: 'a100x4',
        engine: 'slurm',
        reason: 'Resources'
      })
    ).toBe('Queued · Resources');
    expect(
      formatStatus({
        kind: 'gpu',
        state: 'starting',
        engine: 'slurm',
        job: '4242'
      })
    ).toBe('Starting · slurm job 4242');
    expect(formatStatus({ kind: 'gpu', state: 'ended', job: '4242' })).toBe(
      'Ended · job 4242'
    );
    expect(
      formatStatus({
        kind: 'tpu',
        model: 'v5e',
        count: 4,
        state: 'assigned',
        devices: [0, 1, 2, 3].map(i => ({
          id: `tpu${i}`,
          kind: 'tpu',
          model: 'v5e',
          simulated: true
        }))
      })
    ).toBe('TPU · v5e-4 (simulated)');
    expect(
      formatStatus({
        kind: 'gpu',
        model: 'H100',
        count: 1,
        state: 'assigned',
        devices: [{ id: 'g', kind: 'gpu', model: 'H100', simulated: false }]
      })
    ).toBe('GPU · H100 × 1');
  });

  it('names devices, MIG instances included', () => {
    expect(formatDevice(device('gpu1', 'gpu', 'H100'))).toBe(
      'H100 · 1 (simulated)'
    );
    expect(
      formatDevice(
        device('mig', 'gpu', 'A100', { profile: '1g.10gb', simulated: false })
      )
    ).toBe('A100 · MIG 1g.10gb');
  });

  it('writes the KERNEL_ACCELERATOR form the gateway parses', () => {
    expect(formatAcceleratorSpec({ kind: 'cpu', count: 0 })).toBe('cpu');
    expect(
      formatAcceleratorSpec({ kind: 'gpu', model: 'H100', count: 1 })
    ).toBe('gpu:H100:1');
    expect(formatAcceleratorSpec({ kind: 'gpu', count: 2 })).toBe('gpu:2');
    expect(formatAcceleratorSpec({ kind: 'gpu', model: '4090' })).toBe(
      'gpu:4090:1'
    );
    expect(
      formatAcceleratorSpec({ kind: 'gpu', profile: '1g.10gb', count: 1 })
    ).toBe('gpu::1:1g.10gb');
    expect(formatAcceleratorSpec({ kind: 'tpu', model: 'v5e', count: 4 })).toBe(
      'tpu:v5e:4'
    );
    expect(
      formatAcceleratorSpec({
        kind: 'gpu',
        model: 'A100',
        count: 4,
        offer: 'slurm-a100x4'
      })
    ).toBe('offer:slurm-a100x4');
  });
});

describe('formatWait', () => {
  it('says an estimated wait briefly, and nothing without one', () => {
    const wait = (estimateSeconds?: number) => ({
      holders: [],
      basis: 'b',
      ...(estimateSeconds === undefined ? {} : { estimateSeconds })
    });
    expect(formatWait(undefined)).toBe('');
    expect(formatWait(wait())).toBe('');
    expect(formatWait(wait(0))).toBe('starts soon');
    expect(formatWait(wait(45))).toBe('~1 min');
    expect(formatWait(wait(25 * 60))).toBe('~25 min');
    expect(formatWait(wait(3 * 3600))).toBe('~3 h');
  });
});
