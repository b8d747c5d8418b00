/**
 * The picker's choices as the scheduler answers them (`scheduler/offers.ts`): each answer is what
 * the same request then gets from the scheduler, including with devices shared between kernels and
 * with requests waiting for other devices.
 */
import { acceleratorChoices, Scheduler } from '../src/scheduler';
import type { IAcceleratorRequest, IWorkerInventory } from '../src/scheduler';
import type { IDevice } from '../src/protocol/devices';

function worker(
  workerId: string,
  devices: { model: string; count: number }[],
  acceptsCpu = true
): IWorkerInventory {
  return {
    workerId,
    acceptsCpu,
    devices: devices.flatMap(({ model, count }) =>
      Array.from({ length: count }, (_, i): IDevice => ({
        id: `${workerId}-${model}-${i}`,
        kind: 'gpu',
        vendor: 'simulated',
        model,
        name: `Simulated ${model}`,
        visibleId: String(i),
        memoryBytes: 80 * 2 ** 30,
        labels: {},
        simulated: true
      }))
    )
  };
}

const gpu = (model: string, count = 1): IAcceleratorRequest => ({
  kind: 'gpu',
  model,
  count
});

/** The choice for `label`, and what the scheduler then does with the same request. */
function predictAndRequest(scheduler: Scheduler, label: string, id: string) {
  const choice = acceleratorChoices(scheduler).find(c => c.label === label)!;
  const result = scheduler.request(id, choice.request as IAcceleratorRequest);
  return { choice, result };
}

describe("the scheduler's choices", () => {
  it('says a free device starts at once, and it does', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', [{ model: 'H100', count: 2 }]));
    const { choice, result } = predictAndRequest(
      scheduler,
      'GPU · H100 × 1',
      'k1'
    );
    expect(choice).toMatchObject({ availability: 'free', total: 2, free: 2 });
    expect(result.state).toBe('assigned');
  });

  it('says a device held once of two shares has room, and the kernel is placed', () => {
    // --share-devices 2: the browser's own count called a held device busy (queued).
    const scheduler = new Scheduler({ maxKernelsPerDevice: 2 });
    scheduler.setWorker(worker('w1', [{ model: 'H100', count: 1 }]));
    expect(scheduler.request('holder', gpu('H100')).state).toBe('assigned');
    const { choice, result } = predictAndRequest(
      scheduler,
      'GPU · H100 × 1',
      'k1'
    );
    expect(choice).toMatchObject({ availability: 'free', free: 1 });
    expect(result.state).toBe('assigned');
  });

  it('counts only the waiting requests that compete for the same devices', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(
      worker('w1', [
        { model: 'H100', count: 1 },
        { model: 'A100', count: 1 }
      ])
    );
    scheduler.request('h', gpu('H100'));
    scheduler.request('a', gpu('A100'));
    scheduler.request('a-waits', gpu('A100'));
    const { choice, result } = predictAndRequest(
      scheduler,
      'GPU · H100 × 1',
      'k1'
    );
    expect(choice).toMatchObject({
      availability: 'queued',
      queuePosition: 1,
      reason: 'All 1 H100 are busy: you will be queued at position 1'
    });
    // The scheduler's own position counts the A100 request too; none ahead wants an H100.
    expect(result).toEqual({ state: 'queued', position: 2 });
  });

  it('says a request no worker could hold is never placed, with the reason', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', [{ model: 'H100', count: 1 }]));
    const [cpu, h100] = acceleratorChoices(scheduler, {
      environment: 'pytorch'
    });
    expect(cpu).toMatchObject({
      availability: 'unavailable',
      reason: "No connected worker has environment 'pytorch'"
    });
    expect(h100.availability).toBe('unavailable');
    expect(() => scheduler.check(gpu('H100'), 'pytorch')).toThrow(
      "no connected worker has environment 'pytorch'"
    );
  });

  it('answers for a kernel that would move: its devices are its own, its choice is current', () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', [{ model: 'H100', count: 2 }]));
    scheduler.request('k1', gpu('H100'));
    scheduler.request('k2', gpu('H100'));
    const [, one, two] = acceleratorChoices(scheduler, { kernelId: 'k1' });
    expect(one).toMatchObject({
      current: true,
      availability: 'free',
      own: 1,
      reason: 'This kernel runs on it; choosing it keeps the kernel as it is'
    });
    expect(two).toMatchObject({ availability: 'queued', queuePosition: 1 });
    // Nothing changed: the choices were tried on a copy.
    expect(scheduler.queue()).toEqual([]);
    expect(scheduler.placementOf('k1')).toBeDefined();
  });

  it('keeps a waiting request ahead when it has reserved the free devices', () => {
    const scheduler = new Scheduler({ maxBypasses: 0 });
    scheduler.setWorker(worker('w1', [{ model: 'H100', count: 2 }]));
    scheduler.request('one', gpu('H100'));
    scheduler.request('two', gpu('H100', 2));
    expect(scheduler.request('bypass', gpu('H100')).state).toBe('assigned');
    scheduler.release('bypass');
    // `two` reserves the worker: a request for one H100 waits though one is free.
    const { choice, result } = predictAndRequest(
      scheduler,
      'GPU · H100 × 1',
      'k1'
    );
    expect(choice).toMatchObject({
      availability: 'queued',
      queuePosition: 2,
      reason:
        'A request waiting longer has reserved the free H100: you will be queued at position 2'
    });
    expect(result.state).toBe('queued');
  });
});
