/**
 * The picker's choices for pictures of a cluster, as the gateway's scheduler answers them
 * (`schedulerChoices` gives the scheduler the picture, then asks it), and what the library reads
 * from the live model itself: a kernel's status, the environments.
 */
import { environmentChoices, kernelStatus } from '../src/offers';
import { cluster, device, schedulerChoices, worker } from '@ferry/testing';

const choicesFor = (
  model: Parameters<typeof schedulerChoices>[0],
  kernelId?: string
) => schedulerChoices(model, kernelId ? { kernelId } : {});

describe("the gateway's choices", () => {
  it('offers CPU and each device type with counts one worker can hold', () => {
    const offers = choicesFor(cluster());
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
          holder: { kind: 'kernel', id: 'k3' },
          kind: 'gpu',
          model: 'H100',
          count: 1,
          position: 1,
          since: '2026-01-01T00:00:00.000Z'
        }
      ]
    });
    const h100 = choicesFor(model)[1];
    expect(h100.availability).toBe('queued');
    expect(h100.free).toBe(0);
    expect(h100.queuePosition).toBe(2);
    expect(h100.reason).toBe(
      'All 2 H100 are busy: you will be queued at position 2'
    );
  });

  it('overtakes a waiting request that does not fit, as the scheduler does', () => {
    // k3 waits for two H100s; one is free: a request for one is placed before it.
    const waiting = {
      holder: { kind: 'kernel' as const, id: 'k3' },
      kind: 'gpu' as const,
      model: 'H100',
      count: 2,
      position: 1,
      since: '2026-01-01T00:00:00.000Z'
    };
    const [one, two] = choicesFor(
      cluster({ h100Holders: [['k1'], []], queue: [waiting] })
    ).slice(1, 3);
    expect(one.availability).toBe('free');
    expect(two.reason).toBe(
      'Only 1 H100 free on one worker: you will be queued at position 2'
    );
    // Once it has been overtaken as often as the scheduler allows, it reserves the worker: a
    // reservation cannot be pictured, see "keeps a waiting request ahead ..." in
    // kernel-gateway/test/scheduler-offers.spec.ts.
  });

  describe('for a kernel that would move', () => {
    it('counts its own devices as free and marks its choice current', () => {
      // k1 holds one H100, someone else the other.
      const model = cluster({ h100Holders: [['k1'], ['other']] });
      const [cpu, one, two] = choicesFor(model, 'k1');
      expect(one).toMatchObject({
        current: true,
        availability: 'free',
        reason: 'This kernel runs on it; choosing it keeps the kernel as it is'
      });
      expect(cpu.current).toBeUndefined();
      // Two need the other kernel's device: queued, first in line.
      expect(two.availability).toBe('queued');
      expect(two.queuePosition).toBe(1);
      expect(two.free).toBe(1);
      expect(two.own).toBe(1);
      // The same picture for a stranger: the kernel's device is busy.
      expect(choicesFor(model)[1].free).toBe(0);
    });

    it('moves to a larger count at once when the rest is free', () => {
      const model = cluster({ h100Holders: [['k1'], []] });
      const two = choicesFor(model, 'k1')[2];
      expect(two).toMatchObject({
        availability: 'free',
        free: 2,
        own: 1
      });
    });

    it('does not count its own queue entry ahead of it', () => {
      // k2 waits for two H100s while k1 holds one; the other is free.
      const model = cluster({
        h100Holders: [['k1'], []],
        queue: [
          {
            holder: { kind: 'kernel', id: 'k2' },
            kind: 'gpu',
            model: 'H100',
            count: 2,
            position: 1,
            since: '2026-01-01T00:00:00.000Z'
          }
        ]
      });
      const [, one, two] = choicesFor(model, 'k2');
      expect(one.availability).toBe('free');
      expect(one.reason).toBeUndefined();
      expect(two).toMatchObject({
        current: true,
        availability: 'queued',
        queuePosition: 1,
        reason:
          'This kernel waits for it at position 1; choosing it keeps that place'
      });
      // For anyone else, k2 is ahead for two H100s (one, which k2 cannot use, starts now).
      const [, strangerOne, strangerTwo] = choicesFor(model);
      expect(strangerOne.availability).toBe('free');
      expect(strangerTwo.queuePosition).toBe(2);
    });

    it('lets requests waiting for its devices go first', () => {
      // k1 holds one H100 and k2 waits for two: a move of k1 frees its device, k2 takes both.
      const model = cluster({
        h100Holders: [['k1'], []],
        queue: [
          {
            holder: { kind: 'kernel', id: 'k2' },
            kind: 'gpu',
            model: 'H100',
            count: 2,
            position: 1,
            since: '2026-01-01T00:00:00.000Z'
          }
        ]
      });
      const [cpu, one, two] = choicesFor(model, 'k1');
      expect(cpu.availability).toBe('free');
      expect(one.current).toBe(true);
      expect(two).toMatchObject({
        availability: 'queued',
        queuePosition: 1,
        reason:
          "This kernel's H100 would go to the request waiting for them first: you will be queued at position 1"
      });
    });

    it('marks CPU current for a kernel the model does not list', () => {
      const offers = choicesFor(cluster(), 'cpu-kernel');
      expect(offers.filter(offer => offer.current).map(o => o.label)).toEqual([
        'CPU'
      ]);
    });
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
    const [cpu, a100] = choicesFor(model);
    // A CPU kernel waits (the scheduler queues it) until a worker that takes them connects.
    expect(cpu).toMatchObject({
      availability: 'queued',
      reason:
        'No connected worker runs CPU kernels: you will be queued at position 1'
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
          device('g1', 'gpu', 'T4', { holders: [{ kind: 'kernel', id: 'x' }] })
        ]),
        worker('b', [
          device('g0', 'gpu', 'T4'),
          device('g1', 'gpu', 'T4', { holders: [{ kind: 'kernel', id: 'y' }] })
        ])
      ]
    };
    const [, one, two] = choicesFor(model);
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
    expect(choicesFor(model).map(offer => offer.label)).toEqual([
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
    const offer = choicesFor(model).pop()!;
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
          holder: { kind: 'kernel', id: 'k2' },
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

describe('choices in an environment', () => {
  /** A GPU host with PyTorch (JAX missing, and why), a TPU host with JAX that takes no CPU kernels. */
  function twoHosts() {
    return {
      time: '2026-01-01T00:00:10.000Z',
      queue: [],
      environments: [
        { name: 'pytorch', displayName: 'PyTorch' },
        { name: 'jax', displayName: 'JAX' }
      ],
      workers: [
        worker('gpu-1', [device('g0', 'gpu', 'H100')], {
          environments: [
            { name: 'pytorch', displayName: 'PyTorch', available: true },
            {
              name: 'jax',
              displayName: 'JAX',
              available: false,
              reason: '/opt/jax/bin/python not found on gpu-1'
            }
          ]
        }),
        worker('tpu-1', [device('t0', 'tpu', 'v5e')], {
          acceptsCpu: false,
          environments: [
            { name: 'pytorch', displayName: 'PyTorch', available: false },
            { name: 'jax', displayName: 'JAX', available: true }
          ]
        })
      ]
    };
  }

  it('offers each choice in each environment, unavailable where no worker has both, and why', () => {
    const model = twoHosts();
    const inEnvironment = (environment: string) =>
      new Map(
        schedulerChoices(model, { environment }).map(o => [
          `${environment} · ${o.label}`,
          o
        ])
      );
    const offers = new Map([
      ...inEnvironment('pytorch'),
      ...inEnvironment('jax')
    ]);
    expect([...offers.keys()]).toEqual([
      'pytorch · CPU',
      'pytorch · GPU · H100 × 1',
      'pytorch · TPU · v5e-1',
      'jax · CPU',
      'jax · GPU · H100 × 1',
      'jax · TPU · v5e-1'
    ]);
    expect(offers.get('pytorch · GPU · H100 × 1')?.availability).toBe('free');
    expect(offers.get('jax · TPU · v5e-1')?.availability).toBe('free');
    // The GPU host lacks JAX, and the TPU host takes no CPU kernels.
    expect(offers.get('jax · GPU · H100 × 1')).toMatchObject({
      availability: 'unavailable',
      reason: "No worker with environment 'jax' (tpu-1) could hold gpu:H100:1"
    });
    expect(offers.get('jax · CPU')?.availability).toBe('unavailable');
    expect(offers.get('pytorch · TPU · v5e-1')?.availability).toBe(
      'unavailable'
    );
  });

  it('says why when no worker has an environment', () => {
    const model = {
      time: '2026-01-01T00:00:10.000Z',
      queue: [],
      environments: [{ name: 'jax', displayName: 'JAX' }],
      workers: [
        worker('gpu-1', [device('g0', 'gpu', 'H100')], {
          environments: [
            {
              name: 'jax',
              displayName: 'JAX',
              available: false,
              reason: '/opt/jax/bin/python not found on gpu-1'
            }
          ]
        })
      ]
    };
    const [cpu] = schedulerChoices(model, { environment: 'jax' });
    expect(cpu).toMatchObject({
      label: 'CPU',
      availability: 'unavailable',
      reason: "No connected worker has environment 'jax'"
    });
    // The environment menu says why, worker by worker.
    expect(environmentChoices({ ...model, choices: [] })).toEqual([
      {
        name: 'jax',
        displayName: 'JAX',
        unavailable:
          'on no connected worker (gpu-1: /opt/jax/bin/python not found on gpu-1)'
      }
    ]);
  });
});

describe('choices of a kernel in an environment', () => {
  /** One GPU host with PyTorch, a TPU host without it (and why), a kernel on the GPU. */
  function model() {
    return {
      time: '2026-01-01T00:00:10.000Z',
      queue: [],
      environments: [
        { name: 'pytorch', displayName: 'PyTorch' },
        { name: 'jax', displayName: 'JAX' }
      ],
      kernelEnvironments: { k1: 'pytorch' },
      choices: [],
      workers: [
        worker(
          'gpu-1',
          [
            device('g0', 'gpu', 'H100', {
              holders: [{ kind: 'kernel', id: 'k1' }]
            })
          ],
          {
            environments: [
              { name: 'pytorch', displayName: 'PyTorch', available: true },
              {
                name: 'jax',
                displayName: 'JAX',
                available: false,
                reason: '/opt/jax/bin/python not found on gpu-1'
              }
            ]
          }
        ),
        worker('tpu-1', [device('t0', 'tpu', 'v5e')], {
          acceptsCpu: false,
          environments: [
            {
              name: 'pytorch',
              displayName: 'PyTorch',
              available: false,
              reason: '/opt/torch not found on tpu-1'
            }
          ]
        })
      ]
    };
  }

  it('marks what no worker with the environment holds unavailable, with why', () => {
    const offers = schedulerChoices(model(), { environment: 'pytorch' });
    expect(offers.map(o => [o.label, o.availability, o.reason])).toEqual([
      ['CPU', 'free', undefined],
      ['GPU · H100 × 1', 'queued', expect.stringContaining('busy')],
      [
        'TPU · v5e-1',
        'unavailable',
        "No worker with environment 'pytorch' (gpu-1) could hold tpu:v5e:1"
      ]
    ]);
  });

  it("keeps the kernel's choice current only in its own environment", () => {
    const m = model();
    const same = schedulerChoices(m, {
      kernelId: 'k1',
      environment: 'pytorch'
    });
    expect(same.find(o => o.current)?.label).toBe('GPU · H100 × 1');
    // Outside PyTorch the same GPU restarts the kernel: its own device is free for it, not current.
    const none = schedulerChoices(m, { kernelId: 'k1' });
    const gpu = none.find(o => o.label === 'GPU · H100 × 1');
    expect(gpu).toMatchObject({ availability: 'free' });
    expect(gpu?.current).toBeUndefined();
    expect(gpu?.reason).toBeUndefined();
  });

  it('lists the environments, saying why none of the workers has one', () => {
    expect(environmentChoices(model())).toEqual([
      { name: 'pytorch', displayName: 'PyTorch' },
      {
        name: 'jax',
        displayName: 'JAX',
        unavailable:
          'on no connected worker (gpu-1: /opt/jax/bin/python not found on gpu-1; tpu-1: not reported)'
      }
    ]);
    expect(environmentChoices(cluster())).toEqual([]);
  });
});
