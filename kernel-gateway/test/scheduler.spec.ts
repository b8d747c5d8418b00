import {
  BadAcceleratorRequestError,
  formatAcceleratorSpec,
  normalizeAcceleratorRequest,
  parseAcceleratorSpec,
  PlacementConflictError,
  runSchedulerSimulation,
  Scheduler,
  UnsatisfiableRequestError
} from '../src/scheduler';
import type {
  IAcceleratorRequest,
  IPlacement,
  IWorkerInventory
} from '../src/scheduler';
import type { IDevice } from '../src/protocol/devices';

const GiB = 2 ** 30;

/** A device as a worker would list it. */
function device(id: string, overrides: Partial<IDevice> = {}): IDevice {
  return {
    id,
    kind: 'gpu',
    vendor: 'simulated',
    model: 'H100',
    name: 'Simulated H100',
    visibleId: id,
    memoryBytes: 80 * GiB,
    labels: {},
    simulated: true,
    ...overrides
  };
}

/** A worker with `count` devices alike (`w1-gpu-0` ...). */
function worker(
  workerId: string,
  count: number,
  overrides: Partial<IDevice> = {},
  acceptsCpu = false
): IWorkerInventory {
  return {
    workerId,
    acceptsCpu,
    devices: Array.from({ length: count }, (_, i) =>
      device(`${workerId}-${overrides.kind ?? 'gpu'}-${i}`, overrides)
    )
  };
}

const gpu = (count = 1, extra: Partial<IAcceleratorRequest> = {}) =>
  ({ kind: 'gpu', count, ...extra }) as IAcceleratorRequest;

function placed(result: Scheduler.IRequestResult): IPlacement {
  if (result.state !== 'assigned') {
    throw new Error(`expected an assignment, got ${JSON.stringify(result)}`);
  }
  return result.placement;
}

describe('parseAcceleratorSpec', () => {
  it.each([
    ['cpu', { kind: 'cpu', count: 0 }],
    ['gpu', { kind: 'gpu', count: 1 }],
    ['gpu:2', { kind: 'gpu', count: 2 }],
    ['gpu:H100', { kind: 'gpu', model: 'H100', count: 1 }],
    ['GPU:H100:1', { kind: 'gpu', model: 'H100', count: 1 }],
    ['tpu:v5e:4', { kind: 'tpu', model: 'v5e', count: 4 }],
    [
      'gpu:A100:1:1g.10gb',
      { kind: 'gpu', model: 'A100', count: 1, profile: '1g.10gb' }
    ],
    ['gpu::2:1g.10gb', { kind: 'gpu', count: 2, profile: '1g.10gb' }],
    [
      'gpu:A100::1g.10gb',
      { kind: 'gpu', model: 'A100', count: 1, profile: '1g.10gb' }
    ],
    ['gpu:4090:1', { kind: 'gpu', model: '4090', count: 1 }],
    [' gpu : H100 : 2 ', { kind: 'gpu', model: 'H100', count: 2 }]
  ])('reads %j', (text, expected) => {
    expect(parseAcceleratorSpec(text)).toEqual(expected);
  });

  it.each([
    ['fpga', "unknown accelerator kind 'fpga' (cpu, gpu or tpu)"],
    ['gpu:0', 'count must be a whole number of at least 1'],
    ['gpu:H100:0', 'count must be a whole number of at least 1'],
    ['gpu:1.5', 'count must be a whole number of at least 1'],
    ['gpu:-1', 'count must be a whole number of at least 1'],
    ['gpu:H100:two', 'count must be a whole number of at least 1'],
    ['cpu:2', 'cpu takes no model, count or profile'],
    ['tpu:v5e:1:1g.10gb', 'MIG profiles exist only for GPUs'],
    ['gpu:A100:1:', 'the profile after the last'],
    ['gpu:', "nothing after 'gpu:'"],
    ['gpu:A100:1:1g.10gb:x', 'too many fields'],
    ['  ', 'empty accelerator spec']
  ])('refuses %j: %s', (text, message) => {
    expect(() => parseAcceleratorSpec(text)).toThrow(
      BadAcceleratorRequestError
    );
    expect(() => parseAcceleratorSpec(text)).toThrow(message);
  });

  it('round-trips through formatAcceleratorSpec', () => {
    for (const text of [
      'cpu',
      'gpu:2',
      'gpu:H100:1',
      'tpu:v5e:4',
      'gpu:A100:1:1g.10gb',
      'gpu::2:1g.10gb'
    ]) {
      expect(formatAcceleratorSpec(parseAcceleratorSpec(text))).toBe(text);
    }
  });
});

describe('normalizeAcceleratorRequest', () => {
  it('fills in the count: 1 for gpu and tpu, 0 for cpu', () => {
    expect(normalizeAcceleratorRequest({ kind: 'gpu' })).toEqual({
      kind: 'gpu',
      count: 1
    });
    expect(normalizeAcceleratorRequest({ kind: 'tpu', model: 'v5e' })).toEqual({
      kind: 'tpu',
      model: 'v5e',
      count: 1
    });
    expect(normalizeAcceleratorRequest({ kind: 'cpu' })).toEqual({
      kind: 'cpu',
      count: 0
    });
  });

  it('keeps model, memory and profile, and reads null as left out', () => {
    expect(
      normalizeAcceleratorRequest({
        kind: 'GPU',
        model: ' A100 ',
        count: 2,
        memoryGiB: 40,
        profile: null
      })
    ).toEqual({ kind: 'gpu', model: 'A100', count: 2, memoryGiB: 40 });
    expect(
      normalizeAcceleratorRequest({
        kind: 'gpu',
        model: 'A100',
        profile: '1g.10gb'
      })
    ).toEqual({ kind: 'gpu', model: 'A100', count: 1, profile: '1g.10gb' });
  });

  it('reads a string as the environment form', () => {
    expect(normalizeAcceleratorRequest('gpu:H100:2')).toEqual({
      kind: 'gpu',
      model: 'H100',
      count: 2
    });
  });

  it.each([
    [{ kind: 'fpga' }, "unknown accelerator kind 'fpga' (cpu, gpu or tpu)"],
    [{ kind: 'gpu', count: 0 }, 'count must be a whole number of at least 1'],
    [{ kind: 'gpu', count: 1.5 }, 'count must be a whole number of at least 1'],
    [{ kind: 'gpu', count: '1' }, 'count must be a whole number of at least 1'],
    [{ count: 1 }, 'needs a kind (cpu, gpu or tpu)'],
    [{ kind: 3 }, 'kind must be a string'],
    [{ kind: 'gpu', modle: 'H100' }, "unknown field 'modle'"],
    [{ kind: 'gpu', model: '' }, 'model must be a non-empty string'],
    [{ kind: 'gpu', memoryGiB: -4 }, 'memoryGiB must be a positive number'],
    [{ kind: 'cpu', count: 1 }, 'a cpu request holds no device'],
    [{ kind: 'cpu', model: 'H100' }, 'a cpu request takes no model'],
    [{ kind: 'tpu', profile: '1g.10gb' }, 'MIG profiles exist only for GPUs'],
    [[], 'must be an object'],
    [null, 'must be an object']
  ])('refuses %j: %s', (json, message) => {
    expect(() => normalizeAcceleratorRequest(json)).toThrow(
      BadAcceleratorRequestError
    );
    expect(() => normalizeAcceleratorRequest(json)).toThrow(message);
  });
});

describe('Scheduler', () => {
  it("tells 'placed' and 'released' of every placement, however it starts or ends", () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 2));
    const events: string[] = [];
    scheduler.on('placed', (id, placement) =>
      events.push(`placed ${id} ${placement.deviceIds.length}`)
    );
    scheduler.on('released', (id, placement) =>
      events.push(`released ${id} ${placement.deviceIds.join(',')}`)
    );
    const a = placed(scheduler.request('a', gpu()));
    placed(scheduler.request('b', gpu()));
    scheduler.request('c', gpu());
    scheduler.release('a');
    // The queued request's devices are a's.
    expect(events).toEqual([
      'placed a 1',
      'placed b 1',
      `released a ${a.deviceIds.join(',')}`,
      'placed c 1'
    ]);
    events.length = 0;
    // Releasing a queued or unknown holder tells nothing; a worker that goes tells its holders.
    scheduler.request('d', gpu());
    scheduler.release('d');
    scheduler.release('nobody');
    scheduler.removeWorker('w1');
    expect(events.sort()).toEqual([
      expect.stringMatching(/^released b w1-gpu-\d$/),
      expect.stringMatching(/^released c w1-gpu-\d$/)
    ]);
    events.length = 0;
    scheduler.setWorker(worker('w1', 2));
    scheduler.adopt('e', { workerId: 'w1', deviceIds: ['w1-gpu-1'] });
    // A worker whose devices change loses the holders of those gone.
    scheduler.setWorker(worker('w1', 1));
    expect(events).toEqual(['placed e 1', 'released e w1-gpu-1']);
  });

  it('assigns what fits, queues the rest, and hands a freed GPU to the queue', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 2));
    const assigned: Scheduler.IAssignment[] = [];
    scheduler.on('assigned', (kernelId, placement) =>
      assigned.push({ kernelId, placement })
    );

    const a = placed(scheduler.request('a', gpu()));
    const b = placed(scheduler.request('b', gpu()));
    expect(a.workerId).toBe('w1');
    expect(new Set([...a.deviceIds, ...b.deviceIds]).size).toBe(2);
    expect(scheduler.request('c', gpu())).toEqual({
      state: 'queued',
      position: 1
    });
    expect(scheduler.placementOf('c')).toBeUndefined();
    expect(scheduler.queue()).toEqual([
      expect.objectContaining({ kernelId: 'c', position: 1, request: gpu() })
    ]);
    expect(scheduler.queue()[0].since).toBeInstanceOf(Date);
    expect(assigned).toEqual([]);

    const handed = scheduler.release('a');
    const expected = { workerId: 'w1', deviceIds: a.deviceIds };
    expect(handed).toEqual([{ kernelId: 'c', placement: expected }]);
    expect(assigned).toEqual([{ kernelId: 'c', placement: expected }]);
    expect(scheduler.placementOf('c')).toEqual(expected);
    expect(scheduler.placementOf('a')).toBeUndefined();
    expect(scheduler.queue()).toEqual([]);
  });

  it("emits 'changed' for every request, release and worker change", () => {
    const scheduler = new Scheduler();
    let changes = 0;
    scheduler.on('changed', () => changes++);
    scheduler.setWorker(worker('w1', 1));
    scheduler.request('a', gpu());
    scheduler.request('b', gpu());
    scheduler.release('a');
    scheduler.removeWorker('w1');
    expect(changes).toBe(5);
  });

  it('shifts queue positions when an earlier queued request is cancelled', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 1));
    placed(scheduler.request('a', gpu()));
    expect(scheduler.request('b', gpu())).toEqual({
      state: 'queued',
      position: 1
    });
    expect(scheduler.request('c', gpu())).toEqual({
      state: 'queued',
      position: 2
    });
    expect(scheduler.request('d', gpu())).toEqual({
      state: 'queued',
      position: 3
    });

    expect(scheduler.release('c')).toEqual([]);
    expect(scheduler.queue().map(q => [q.kernelId, q.position])).toEqual([
      ['b', 1],
      ['d', 2]
    ]);
    expect(scheduler.positionOf('d')).toBe(2);

    expect(scheduler.release('a').map(x => x.kernelId)).toEqual(['b']);
    expect(scheduler.positionOf('d')).toBe(1);
    expect(scheduler.positionOf('c')).toBeUndefined();
    expect(scheduler.release('nobody')).toEqual([]);
  });

  it('refuses requests no connected worker could ever hold, saying what exists', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 2));
    scheduler.setWorker(worker('w2', 4, { model: 'A100' }));

    const refusal = (request: IAcceleratorRequest) => {
      try {
        scheduler.request('k', request);
      } catch (error) {
        expect(error).toBeInstanceOf(UnsatisfiableRequestError);
        return (error as Error).message;
      }
      throw new Error('expected a refusal');
    };
    expect(refusal(gpu(1000))).toBe(
      'no worker has 1000 GPUs (all devices of a request are on one worker); the most on one worker is 4'
    );
    expect(refusal(gpu(3, { model: 'H100' }))).toBe(
      'no worker has 3 H100 GPUs (all devices of a request are on one worker); the most on one worker is 2'
    );
    expect(refusal(gpu(1, { model: 'B200' }))).toBe(
      "no worker has a GPU of model 'B200'; GPU models: H100, A100"
    );
    expect(refusal(gpu(0))).toMatch(
      /gpu request for 0 devices can never be placed/
    );
    expect(refusal({ kind: 'tpu', count: 1 })).toBe(
      'no worker has a TPU; available: gpu H100 ×2 (simulated), gpu A100 ×4 (simulated)'
    );
    expect(refusal(gpu(1, { memoryGiB: 100 }))).toBe(
      'no GPU has 100 GiB of memory; the largest has 80 GiB'
    );
    expect(() => scheduler.request('k', gpu(1.5))).toThrow(
      BadAcceleratorRequestError
    );
    expect(() =>
      scheduler.request('k', { kind: 'fpga' } as unknown as IAcceleratorRequest)
    ).toThrow("unknown accelerator kind 'fpga' (cpu, gpu or tpu)");
    // A refused request leaves nothing behind.
    expect(scheduler.queue()).toEqual([]);
    expect(scheduler.placementOf('k')).toBeUndefined();
  });

  it('says so when no worker is connected at all', () => {
    const scheduler = new Scheduler();
    expect(() => scheduler.request('k', gpu())).toThrow(
      'no worker has a GPU; available: nothing (no worker is connected)'
    );
  });

  it('matches models case-insensitively and never substitutes another', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('a100s', 1, { model: 'A100' }));
    scheduler.setWorker(worker('h100s', 1, { model: 'H100' }));

    expect(placed(scheduler.request('a', gpu(1, { model: 'h100' })))).toEqual({
      workerId: 'h100s',
      deviceIds: ['h100s-gpu-0']
    });
    // An A100 is free, but it is not what was asked for.
    expect(scheduler.request('b', gpu(1, { model: 'H100' }))).toEqual({
      state: 'queued',
      position: 1
    });
    // Any model takes the A100.
    expect(placed(scheduler.request('c', gpu())).workerId).toBe('a100s');
    expect(scheduler.release('a')).toEqual([
      {
        kernelId: 'b',
        placement: { workerId: 'h100s', deviceIds: ['h100s-gpu-0'] }
      }
    ]);
  });

  it('gives one request devices of one model, on one worker', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker({
      workerId: 'mixed',
      acceptsCpu: false,
      devices: [device('g0'), device('g1', { model: 'A100' })]
    });
    scheduler.setWorker(worker('w2', 1));
    expect(() => scheduler.request('k', gpu(2))).toThrow(
      'the most on one worker is 1'
    );
  });

  it('matches MIG profiles and never hands out the GPU they are cut from', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker({
      workerId: 'mig',
      acceptsCpu: false,
      devices: [
        device('GPU-0', { model: 'A100' }),
        device('MIG-a', {
          model: 'A100',
          profile: '1g.10gb',
          parentId: 'GPU-0'
        }),
        device('MIG-b', {
          model: 'A100',
          profile: '1g.10gb',
          parentId: 'GPU-0'
        }),
        device('MIG-c', {
          model: 'A100',
          profile: '3g.40gb',
          parentId: 'GPU-0'
        })
      ]
    });
    const slice = gpu(1, { model: 'A100', profile: '1G.10GB' });
    expect(placed(scheduler.request('a', slice)).deviceIds).toEqual(['MIG-a']);
    expect(placed(scheduler.request('b', slice)).deviceIds).toEqual(['MIG-b']);
    // The 3g.40gb instance is free, but it is not the profile asked for.
    expect(scheduler.request('c', slice)).toEqual({
      state: 'queued',
      position: 1
    });
    expect(
      placed(scheduler.request('d', gpu(1, { profile: '3g.40gb' }))).deviceIds
    ).toEqual(['MIG-c']);

    expect(() => scheduler.request('e', gpu(1, { model: 'A100' }))).toThrow(
      'no worker has a whole A100 GPU: they are split into MIG instances, ask for a profile (1g.10gb, 3g.40gb)'
    );
    expect(() =>
      scheduler.request('e', gpu(1, { model: 'A100', profile: '2g.20gb' }))
    ).toThrow(
      "no worker has A100 GPU MIG instances of profile '2g.20gb'; profiles: 1g.10gb, 3g.40gb"
    );
    expect(() => scheduler.request('e', { ...slice, count: 3 })).toThrow(
      'no worker has 3 A100 GPU MIG instances of profile 1g.10gb (all devices of a request are on one worker); the most on one worker is 2'
    );
    expect(scheduler.allocations().map(a => a.deviceId)).toEqual([
      'MIG-a',
      'MIG-b',
      'MIG-c'
    ]);
  });

  it('places by memory: only devices with at least memoryGiB', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(
      worker('small', 1, { model: 'A100', memoryBytes: 40 * GiB })
    );
    scheduler.setWorker(
      worker('large', 1, { model: 'A100', memoryBytes: 80 * GiB })
    );
    expect(
      placed(scheduler.request('a', gpu(1, { memoryGiB: 60 }))).workerId
    ).toBe('large');
    // The 40 GiB A100 is free, but too small.
    expect(scheduler.request('b', gpu(1, { memoryGiB: 60 }))).toEqual({
      state: 'queued',
      position: 1
    });
    expect(
      placed(scheduler.request('c', gpu(1, { memoryGiB: 40 }))).workerId
    ).toBe('small');
    expect(() =>
      scheduler.request('d', gpu(1, { model: 'A100', memoryGiB: 81 }))
    ).toThrow('no A100 GPU has 81 GiB of memory; the largest has 80 GiB');
    expect(scheduler.release('a').map(x => x.kernelId)).toEqual(['b']);
  });

  it('packs onto the fullest worker that fits, or spreads onto the emptiest', () => {
    const inventories = [worker('two', 2), worker('four', 4)];
    const pack = new Scheduler({ policy: 'pack' });
    const spread = new Scheduler({ policy: 'spread' });
    for (const inventory of inventories) {
      pack.setWorker(inventory);
      spread.setWorker(inventory);
    }
    expect(placed(pack.request('a', gpu())).workerId).toBe('two');
    expect(placed(pack.request('b', gpu())).workerId).toBe('two');
    expect(placed(pack.request('c', gpu())).workerId).toBe('four');
    expect(placed(pack.request('d', gpu(2))).workerId).toBe('four');

    expect(placed(spread.request('a', gpu())).workerId).toBe('four');
    expect(placed(spread.request('b', gpu())).workerId).toBe('four');
    expect(placed(spread.request('c', gpu())).workerId).toBe('two');
    expect(placed(spread.request('d', gpu())).workerId).toBe('four');
  });

  it('places CPU kernels on workers that take them, and queues them only when none does', () => {
    const pack = new Scheduler();
    const spread = new Scheduler({ policy: 'spread' });
    for (const scheduler of [pack, spread]) {
      scheduler.setWorker(worker('gpus', 2));
      scheduler.setWorker(worker('c1', 0, {}, true));
      scheduler.setWorker(worker('c2', 0, {}, true));
    }
    const cpu = { kind: 'cpu', count: 0 } as const;
    expect(
      ['a', 'b', 'c'].map(id => placed(pack.request(id, cpu)).workerId)
    ).toEqual(['c1', 'c1', 'c1']);
    expect(
      ['a', 'b', 'c'].map(id => placed(spread.request(id, cpu)).workerId)
    ).toEqual(['c1', 'c2', 'c1']);
    expect(placed(pack.request('d', cpu)).deviceIds).toEqual([]);

    const waiting = new Scheduler();
    waiting.setWorker(worker('gpus', 2));
    expect(waiting.request('a', cpu)).toEqual({
      state: 'queued',
      position: 1
    });
    const assigned: string[] = [];
    waiting.on('assigned', id => assigned.push(id));
    expect(waiting.setWorker(worker('laptop', 0, {}, true))).toEqual({
      assigned: [
        { kernelId: 'a', placement: { workerId: 'laptop', deviceIds: [] } }
      ],
      lost: []
    });
    expect(assigned).toEqual(['a']);
  });

  it('shares a device between kernels with maxKernelsPerDevice 2', () => {
    const scheduler = new Scheduler({ maxKernelsPerDevice: 2 });
    scheduler.setWorker(worker('w1', 1));
    const a = placed(scheduler.request('a', gpu()));
    const b = placed(scheduler.request('b', gpu()));
    expect(b).toEqual(a);
    expect(scheduler.request('c', gpu())).toEqual({
      state: 'queued',
      position: 1
    });
    expect(scheduler.allocations()).toEqual([
      { workerId: 'w1', deviceId: 'w1-gpu-0', kernelIds: ['a', 'b'] }
    ]);
    // Two devices for one kernel are two devices, shared or not.
    expect(() => scheduler.request('d', gpu(2))).toThrow(
      UnsatisfiableRequestError
    );
    expect(scheduler.release('a')).toEqual([{ kernelId: 'c', placement: a }]);
  });

  it('frees the devices of a removed worker and returns the kernels that lost them', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 2, {}, true));
    scheduler.setWorker(worker('w2', 1));
    placed(scheduler.request('a', gpu(2)));
    placed(scheduler.request('b', { kind: 'cpu', count: 0 }));
    placed(scheduler.request('c', gpu()));
    expect(scheduler.request('d', gpu(2))).toEqual({
      state: 'queued',
      position: 1
    });

    expect(scheduler.removeWorker('w1').sort()).toEqual(['a', 'b']);
    expect(scheduler.placementOf('a')).toBeUndefined();
    expect(scheduler.placementOf('b')).toBeUndefined();
    expect(scheduler.placementOf('c')?.workerId).toBe('w2');
    expect(scheduler.allocations().map(x => x.workerId)).toEqual(['w2']);
    // The queued request waits for a worker that can hold it.
    expect(scheduler.positionOf('d')).toBe(1);
    expect(scheduler.removeWorker('w1')).toEqual([]);

    expect(scheduler.setWorker(worker('w1', 2)).assigned).toEqual([
      {
        kernelId: 'd',
        placement: { workerId: 'w1', deviceIds: ['w1-gpu-0', 'w1-gpu-1'] }
      }
    ]);
  });

  it('keeps placements on devices a worker still lists and drops those on devices it lost', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 3));
    placed(scheduler.request('a', gpu()));
    placed(scheduler.request('b', gpu()));
    placed(scheduler.request('c', gpu()));
    scheduler.request('d', gpu(2));
    const inventory = worker('w1', 3);
    const update = scheduler.setWorker({
      ...inventory,
      devices: inventory.devices.filter(d => d.id !== 'w1-gpu-1')
    });
    expect(update).toEqual({ assigned: [], lost: ['b'] });
    expect(scheduler.placementOf('a')?.deviceIds).toEqual(['w1-gpu-0']);
    expect(scheduler.placementOf('c')?.deviceIds).toEqual(['w1-gpu-2']);

    const grown = scheduler.setWorker(worker('w1', 5));
    expect(grown.assigned).toEqual([
      {
        kernelId: 'd',
        placement: { workerId: 'w1', deviceIds: ['w1-gpu-1', 'w1-gpu-3'] }
      }
    ]);
  });

  it('adopts kernels that already run, and refuses conflicting ones', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 2));
    scheduler.adopt('old', { workerId: 'w1', deviceIds: ['w1-gpu-0'] });
    expect(scheduler.placementOf('old')).toEqual({
      workerId: 'w1',
      deviceIds: ['w1-gpu-0']
    });
    // Adopting the same placement again changes nothing.
    scheduler.adopt('old', { workerId: 'w1', deviceIds: ['w1-gpu-0'] });
    expect(placed(scheduler.request('new', gpu())).deviceIds).toEqual([
      'w1-gpu-1'
    ]);

    expect(() =>
      scheduler.adopt('other', { workerId: 'w1', deviceIds: ['w1-gpu-0'] })
    ).toThrow(
      new PlacementConflictError(
        'cannot adopt kernel other: device w1-gpu-0 on worker w1 is held by kernel old'
      )
    );
    expect(() =>
      scheduler.adopt('other', { workerId: 'w1', deviceIds: ['nope'] })
    ).toThrow('worker w1 has no device nope');
    expect(() =>
      scheduler.adopt('other', { workerId: 'gone', deviceIds: [] })
    ).toThrow('worker gone is not connected');
    expect(() =>
      scheduler.adopt('old', { workerId: 'w1', deviceIds: ['w1-gpu-1'] })
    ).toThrow(PlacementConflictError);
    expect(scheduler.placementOf('other')).toBeUndefined();

    // Released, an adopted kernel's device goes to the queue like any other.
    scheduler.request('waiting', gpu());
    expect(scheduler.release('old')).toEqual([
      {
        kernelId: 'waiting',
        placement: { workerId: 'w1', deviceIds: ['w1-gpu-0'] }
      }
    ]);
  });

  it('lets small requests past a big one only until it has been overtaken maxBypasses times', () => {
    const run = (maxBypasses: number) => {
      const scheduler = new Scheduler({ maxBypasses });
      scheduler.setWorker(worker('w1', 2));
      placed(scheduler.request('first', gpu()));
      expect(scheduler.request('big', gpu(2))).toEqual({
        state: 'queued',
        position: 1
      });
      // One GPU is free: a small request goes ahead of the big one (overtaking 1).
      placed(scheduler.request('s1', gpu()));
      expect(scheduler.request('s2', gpu())).toEqual({
        state: 'queued',
        position: 2
      });
      // The freed GPU is too little for the big request: s2 goes ahead (overtaking 2).
      expect(scheduler.release('first').map(x => x.kernelId)).toEqual(['s2']);
      scheduler.request('s3', gpu());
      return { scheduler, handed: scheduler.release('s1') };
    };

    const fair = run(2);
    // The big request now holds the worker: s3 waits though a GPU is free.
    expect(fair.handed).toEqual([]);
    expect(fair.scheduler.queue().map(q => q.kernelId)).toEqual(['big', 's3']);
    expect(fair.scheduler.release('s2')).toEqual([
      {
        kernelId: 'big',
        placement: { workerId: 'w1', deviceIds: ['w1-gpu-0', 'w1-gpu-1'] }
      }
    ]);

    const firstFit = run(Infinity);
    expect(firstFit.handed.map(x => x.kernelId)).toEqual(['s3']);
    expect(firstFit.scheduler.queue().map(q => q.kernelId)).toEqual(['big']);
  });

  it('refuses a second request for a kernel that is placed or queued', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 1));
    scheduler.request('a', gpu());
    scheduler.request('b', gpu());
    expect(() => scheduler.request('a', gpu())).toThrow(
      'kernel a already holds a placement'
    );
    expect(() => scheduler.request('b', gpu())).toThrow(
      'kernel b already waits in the queue'
    );
  });
});

describe('Scheduler with a dedicated worker (one an engine started for one kernel)', () => {
  it('hands its devices only to the kernel that adopts them', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('shared', 1));
    expect(placed(scheduler.request('a', gpu()))).toEqual({
      workerId: 'shared',
      deviceIds: ['shared-gpu-0']
    });
    expect(scheduler.request('b', gpu())).toEqual({
      state: 'queued',
      position: 1
    });
    const assigned: string[] = [];
    scheduler.on('assigned', id => assigned.push(id));
    scheduler.setWorker({ ...worker('job-k', 2), dedicated: true });
    // The queued request does not take the job's devices, and nothing new fits there either.
    expect(assigned).toEqual([]);
    expect(() => scheduler.request('c', gpu(2))).toThrow(
      UnsatisfiableRequestError
    );
    scheduler.adopt('k', {
      workerId: 'job-k',
      deviceIds: ['job-k-gpu-0', 'job-k-gpu-1']
    });
    expect(scheduler.placementOf('k')?.deviceIds).toHaveLength(2);
    scheduler.release('k');
    expect(assigned).toEqual([]);
    expect(scheduler.removeWorker('job-k')).toEqual([]);
    // The shared pool of the same model is untouched.
    scheduler.release('a');
    expect(assigned).toEqual(['b']);
  });
});

describe('runSchedulerSimulation', () => {
  it('never gives a device to two kernels, nor a kernel what it did not ask for', () => {
    for (const options of [
      { workers: 1000, devicesPerWorker: 8, operations: 10000, seed: 1 },
      {
        workers: 40,
        devicesPerWorker: 8,
        operations: 5000,
        seed: 2,
        policy: 'spread' as const
      },
      {
        workers: 40,
        devicesPerWorker: 8,
        operations: 5000,
        seed: 3,
        maxKernelsPerDevice: 2
      },
      {
        workers: 20,
        devicesPerWorker: 8,
        operations: 5000,
        seed: 4,
        maxBypasses: 0
      }
    ]) {
      const result = runSchedulerSimulation(options);
      expect(result).toMatchObject({
        doubleAllocations: 0,
        wrongPlacements: 0,
        unsatisfiable: 0
      });
      expect(result.placements).toBeGreaterThan(0);
      expect(result.releases).toBeGreaterThan(0);
      expect(result.queuedPeak).toBeGreaterThan(0);
    }
  });

  it('is deterministic for a seed', () => {
    const options = {
      workers: 30,
      devicesPerWorker: 8,
      operations: 2000,
      seed: 42
    };
    const strip = ({
      totalMs: _total,
      schedulerMs: _scheduler,
      decisionP50Ms: _p50,
      decisionP99Ms: _p99,
      ...counts
    }: ReturnType<typeof runSchedulerSimulation>) => counts;
    expect(strip(runSchedulerSimulation(options))).toEqual(
      strip(runSchedulerSimulation(options))
    );
    // So is one from many users in fair-share order.
    expect(strip(runSchedulerSimulation({ ...options, users: 50 }))).toEqual(
      strip(runSchedulerSimulation({ ...options, users: 50 }))
    );
  });
});

describe('environments', () => {
  const h100 = (workerId: string, environments: string[]) => ({
    workerId,
    acceptsCpu: true,
    environments,
    devices: [device(`${workerId}-gpu-0`)]
  });

  it('places and queues a request only on workers that have its environment', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(h100('plain', []));
    scheduler.setWorker(h100('torch', ['pytorch']));
    expect(placed(scheduler.request('k1', gpu(1), 'pytorch')).workerId).toBe(
      'torch'
    );
    // The plain worker's GPU is free, but it lacks the environment: the request waits.
    expect(scheduler.request('k2', gpu(1), 'pytorch')).toEqual({
      state: 'queued',
      position: 1
    });
    expect(scheduler.queue()[0]).toMatchObject({
      request: { kind: 'gpu', count: 1 },
      environment: 'pytorch'
    });
    // A request of no environment takes the plain worker's GPU meanwhile.
    expect(placed(scheduler.request('k3', gpu(1))).workerId).toBe('plain');
    expect(scheduler.release('k1')).toEqual([
      {
        kernelId: 'k2',
        placement: { workerId: 'torch', deviceIds: ['torch-gpu-0'] }
      }
    ]);
    // CPU kernels too.
    expect(
      placed(scheduler.request('c1', { kind: 'cpu', count: 0 }, 'pytorch'))
        .workerId
    ).toBe('torch');
  });

  it('queues a request until a worker gains its environment', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(h100('w', ['jax']));
    scheduler.request('k0', gpu(1), 'jax');
    expect(scheduler.request('k1', { kind: 'cpu', count: 0 }, 'jax')).toEqual({
      state: 'assigned',
      placement: { workerId: 'w', deviceIds: [] }
    });
    expect(() => scheduler.request('k2', gpu(1), 'pytorch')).toThrow(
      new UnsatisfiableRequestError(
        "no connected worker has environment 'pytorch'",
        gpu(1)
      )
    );
    const twoGpus = [device('v-gpu-0'), device('v-gpu-1')];
    scheduler.setWorker({ ...h100('v', []), devices: twoGpus });
    expect(() => scheduler.request('k3', gpu(2), 'jax')).toThrow(
      "no worker with environment 'jax' (w) could hold gpu:2"
    );
    expect(scheduler.request('k4', gpu(1), 'jax').state).toBe('queued');
    // The other worker reports it now (it re-registered): the queued request goes there.
    const update = scheduler.setWorker({
      ...h100('v', ['jax']),
      devices: twoGpus
    });
    expect(update.assigned).toEqual([
      { kernelId: 'k4', placement: { workerId: 'v', deviceIds: ['v-gpu-0'] } }
    ]);
  });
});
