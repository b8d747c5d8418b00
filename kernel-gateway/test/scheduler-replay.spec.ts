/**
 * The day's replay of interactive users (the bench's) on a small pool: the same cells run under
 * both ways of holding devices, never two kernels on one device, and holding while used holds less;
 * and the bench's simulation of many users in fair-share order.
 */
import { runInteractiveReplay, runSchedulerSimulation } from '../src/scheduler';

describe('runInteractiveReplay', () => {
  it('runs the same day under both policies; held while used holds less, none shared', () => {
    const day = { users: 40, workers: 2, devicesPerWorker: 8, seed: 7 };
    const open = runInteractiveReplay({ ...day, policy: 'open-to-close' });
    const used = runInteractiveReplay({
      ...day,
      policy: { idleReturnMs: 10 * 60_000 }
    });
    for (const result of [open, used]) {
      expect(result.doubleAllocations).toBe(0);
      expect(result.heldDeviceHours).toBeGreaterThan(result.busyDeviceHours);
    }
    expect(used.cells).toBe(open.cells);
    expect(used.busyDeviceHours).toBeCloseTo(open.busyDeviceHours, 6);
    expect(open.acquisitions).toBe(open.sessions);
    expect(used.acquisitions).toBeGreaterThan(used.sessions);
    expect(used.heldDeviceHours).toBeLessThan(open.heldDeviceHours);
  });
});

describe('runSchedulerSimulation with many users', () => {
  it('places in fair-share order without a double or wrong allocation', () => {
    const result = runSchedulerSimulation({
      workers: 50,
      devicesPerWorker: 8,
      operations: 3000,
      users: 100,
      seed: 3
    });
    expect(result.placements).toBeGreaterThan(500);
    expect(result.doubleAllocations).toBe(0);
    expect(result.wrongPlacements).toBe(0);
  });
});
