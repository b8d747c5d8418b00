import { computeOffers, kernelStatus } from '../src/offers';
import { cluster, device, worker } from '@ferry/testing';

describe('computeOffers', () => {
  it('offers CPU and each device type with counts one worker can hold', () => {
    const offers = computeOffers(cluster());
    expect(offers.map(offer => offer.label)).toEqual([
      'CPU',
      'GPU · H100 × 1',
      'GPU · H100 × 2',
      'TPU · v5e-1',
      'TPU · v5e-2',
      'TPU · v5e-4'
    ]);
    const h100 = offers[1];
    expect(h100).toMatchObject({
      availability: 'free',
      free: 2,
      total: 2,
      simulated: true
    });
  });

  it('says a busy type queues, and at which position', () => {
    const model = cluster({
      h100Holders: [['k1'], ['k2']],
      queue: [
        {
          kernelId: 'k3',
          kind: 'gpu',
          model: 'H100',
          count: 1,
          position: 1,
          since: '2026-01-01T00:00:00.000Z'
        }
      ]
    });
    const h100 = computeOffers(model)[1];
    expect(h100.availability).toBe('queued');
    expect(h100.free).toBe(0);
    expect(h100.queuePosition).toBe(2);
    expect(h100.reason).toBe(
      'All 2 H100 are busy: you will be queued at position 2'
    );
  });

  it('queues behind waiting requests even when a device just freed up', () => {
    const model = cluster({
      h100Holders: [['k1'], []],
      queue: [
        {
          kernelId: 'k3',
          kind: 'gpu',
          model: 'H100',
          count: 2,
          position: 1,
          since: '2026-01-01T00:00:00.000Z'
        }
      ]
    });
    const [one, two] = computeOffers(model).slice(1, 3);
    expect(one.reason).toBe(
      '1 request waits for H100: you will be queued at position 2'
    );
    expect(two.reason).toBe(
      'Only 1 H100 free on one worker: you will be queued at position 2'
    );
  });

  it('marks types of disconnected workers unavailable, with the reason', () => {
    const model = {
      time: '2026-01-01T00:00:00.000Z',
      queue: [],
      workers: [
        worker('a', [device('g', 'gpu', 'A100')], {
          connected: false,
          acceptsCpu: false
        })
      ]
    };
    const [cpu, a100] = computeOffers(model);
    expect(cpu).toMatchObject({
      availability: 'unavailable',
      reason: 'No connected worker runs CPU kernels'
    });
    expect(a100).toMatchObject({
      label: 'GPU · A100 × 1',
      availability: 'unavailable',
      reason: 'Every worker with A100 is disconnected'
    });
  });

  it('counts free devices per worker, since one kernel gets one worker', () => {
    const model = {
      time: '2026-01-01T00:00:00.000Z',
      queue: [],
      workers: [
        worker('a', [
          device('g0', 'gpu', 'T4'),
          device('g1', 'gpu', 'T4', { kernels: ['x'] })
        ]),
        worker('b', [
          device('g0', 'gpu', 'T4'),
          device('g1', 'gpu', 'T4', { kernels: ['y'] })
        ])
      ]
    };
    const [, one, two] = computeOffers(model);
    expect(one).toMatchObject({ availability: 'free', free: 2, total: 4 });
    expect(two).toMatchObject({ availability: 'queued', maxPerWorker: 2 });
  });

  it('offers MIG instances apart from whole GPUs', () => {
    const model = {
      time: '2026-01-01T00:00:00.000Z',
      queue: [],
      workers: [
        worker('a', [
          device('mig0', 'gpu', 'A100', {
            profile: '1g.10gb',
            simulated: false
          }),
          device('g1', 'gpu', 'A100', { simulated: false })
        ])
      ]
    };
    expect(computeOffers(model).map(offer => offer.label)).toEqual([
      'CPU',
      'GPU · A100 × 1',
      'GPU · A100 · MIG 1g.10gb'
    ]);
  });
});

describe('engine offers', () => {
  it('lists the offers of the profiles file, which wait for a cluster job', () => {
    const model = {
      ...cluster(),
      offers: [
        {
          name: 'slurm-a100x4',
          displayName: 'A100 × 4 (8 h)',
          engine: 'slurm' as const,
          accelerator: { kind: 'gpu' as const, model: 'A100', count: 4 }
        }
      ]
    };
    const offer = computeOffers(model).pop()!;
    expect(offer).toMatchObject({
      label: 'A100 × 4 (8 h) · Slurm',
      request: { kind: 'gpu', model: 'A100', count: 4, offer: 'slurm-a100x4' },
      availability: 'queued',
      engine: 'slurm',
      reason:
        'Starts a Slurm job for GPU · A100 × 4: the kernel waits until the cluster runs it'
    });
  });
});

describe('kernelStatus', () => {
  it('finds a queued kernel with its position and an assigned one with its devices', () => {
    const model = cluster({
      h100Holders: [['k1'], ['k1']],
      queue: [
        {
          kernelId: 'k2',
          kind: 'gpu',
          model: 'H100',
          count: 1,
          position: 1,
          since: '2026-01-01T00:00:00.000Z'
        }
      ]
    });
    expect(kernelStatus(model, 'k2')).toMatchObject({
      state: 'queued',
      position: 1
    });
    expect(kernelStatus(model, 'k1')).toMatchObject({
      state: 'assigned',
      kind: 'gpu',
      model: 'H100',
      count: 2,
      workerName: 'w1'
    });
    expect(kernelStatus(model, 'cpu-kernel')).toBeUndefined();
  });
});
