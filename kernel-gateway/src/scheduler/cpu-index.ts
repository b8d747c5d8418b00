/**
 * The workers that take CPU kernels (kernels that hold no device), indexed by how many CPU kernels
 * each runs, so `spread` finds the least loaded one without a scan.
 */
import type { IWorkerState, Policy } from './state';

/** Workers that take CPU kernels, by how many they run. */
export class CpuIndex {
  /** How many workers take CPU kernels. */
  get size(): number {
    return this._workers.size;
  }

  add(worker: IWorkerState): void {
    this._workers.add(worker);
    this._bucket(worker.cpuKernels).add(worker);
    this._min = Math.min(this._min, worker.cpuKernels);
  }

  remove(worker: IWorkerState): void {
    this._workers.delete(worker);
    this._bucket(worker.cpuKernels).delete(worker);
  }

  /** Count one CPU kernel more or less on a worker, whether or not it still takes them. */
  load(worker: IWorkerState, delta: number): void {
    const listed = this._workers.has(worker);
    if (listed) {
      this._bucket(worker.cpuKernels).delete(worker);
    }
    worker.cpuKernels += delta;
    if (listed) {
      this._bucket(worker.cpuKernels).add(worker);
      this._min = Math.min(this._min, worker.cpuKernels);
    }
  }

  /**
   * `pack`: the first worker that takes CPU kernels; `spread`: the one running fewest. With an
   * environment, only among the workers that have it.
   */
  pick(policy: Policy, environment?: string): IWorkerState | undefined {
    if (this._workers.size === 0) {
      return undefined;
    }
    if (environment !== undefined) {
      let best: IWorkerState | undefined;
      for (const worker of this._workers) {
        if (
          worker.environments.has(environment) &&
          (!best ||
            (policy === 'spread' && worker.cpuKernels < best.cpuKernels))
        ) {
          best = worker;
        }
      }
      return best;
    }
    if (policy === 'pack') {
      return this._workers.values().next().value;
    }
    while (!this._byLoad[this._min]?.size) {
      this._min++;
    }
    return this._byLoad[this._min].values().next().value;
  }

  private _bucket(load: number): Set<IWorkerState> {
    while (this._byLoad.length <= load) {
      this._byLoad.push(new Set());
    }
    return this._byLoad[load];
  }

  private _workers = new Set<IWorkerState>();
  private _byLoad: Set<IWorkerState>[] = [];
  /** At most the lowest load of a listed worker. */
  private _min = 0;
}
