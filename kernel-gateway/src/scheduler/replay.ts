/**
 * A day of interactive notebook users replayed on the real {@link Scheduler} with a simulated clock:
 * the same users, sessions, cells and think times under two ways of holding devices, side by side
 * (`npm run bench:scheduler`). Holding from open to close asks for a GPU when the notebook's kernel
 * starts and keeps it until the kernel shuts down; holding while used (issue #26) asks when a cell
 * first needs it and gives it back after an idle timeout.
 *
 * @packageDocumentation
 */
import { DecayedUsage, FairShare } from './fair-share';
import { Scheduler } from './scheduler';
import { gaussian, mulberry32, percentile } from './seeded';
import type { IDevice } from '../protocol/devices';

/** The day to replay. */
export interface IInteractiveReplayOptions {
  /** People, each opening one to three notebooks in the day. */
  users: number;
  /** Workers with `devicesPerWorker` simulated H100s each. */
  workers: number;
  devicesPerWorker: number;
  /** The same seed gives the same day. */
  seed: number;
  /** How devices are held: from open to close, or while used with this idle timeout (ms). */
  policy: 'open-to-close' | { idleReturnMs: number };
}

/** What the day cost and how long people waited, under one policy. */
export interface IInteractiveReplayResult {
  policy: string;
  sessions: number;
  cells: number;
  /** Times a kernel asked for a device (once per session, or once per spell of use). */
  acquisitions: number;
  /** Device-hours held: from each placement to its release. */
  heldDeviceHours: number;
  /** Device-hours a cell was running on a held device. */
  busyDeviceHours: number;
  /** Of the acquisitions, from the request to the placement (0 for one placed at once). */
  medianWaitSeconds: number;
  p90WaitSeconds: number;
  /** How much later than planned people's cells started, in all (hours). */
  cellDelayHours: number;
  /** Devices held by more kernels than one at any moment (must be 0). */
  doubleAllocations: number;
}

/**
 * Replay one day.
 *
 * #### Notes
 * The workload, the same for every policy: each person opens one notebook (half of them a second,
 * a fifth a third) between 08:00 and 17:00. A notebook reads for a while (median 2 min) before its
 * first cell, then runs 3 or more cells (median 18): most take seconds (median 10 s), one in twelve
 * trains for minutes (median 8 min); between cells the person thinks (median 1 min) or, one time in
 * twelve, takes a break (median 40 min). After the last cell the notebook stays open (median
 * 30 min; some for hours) until it is closed. A cell that has no device waits for one; what waits
 * is ordered by fair share among the people, as the gateway does with sign-in.
 */
export function runInteractiveReplay(
  options: IInteractiveReplayOptions
): IInteractiveReplayResult {
  const random = mulberry32(options.seed);
  const sessions = Private.workload(options.users, random);
  const clock = { now: sessions[0]?.openAt ?? 0 };
  const usage = new DecayedUsage();
  const scheduler = new Scheduler({
    now: () => clock.now,
    fairShare: new FairShare({ usage })
  });
  for (let w = 0; w < options.workers; w++) {
    scheduler.setWorker({
      workerId: `worker-${w}`,
      acceptsCpu: false,
      devices: Array.from(
        { length: options.devicesPerWorker },
        (_, i): IDevice => ({
          id: `gpu-${i}`,
          kind: 'gpu',
          vendor: 'simulated',
          model: 'H100',
          name: 'Simulated H100',
          visibleId: String(i),
          memoryBytes: 80 * 2 ** 30,
          labels: {},
          simulated: true
        })
      )
    });
  }
  const idleReturnMs =
    options.policy === 'open-to-close'
      ? undefined
      : options.policy.idleReturnMs;
  const result: IInteractiveReplayResult = {
    policy:
      idleReturnMs === undefined
        ? 'held from open to close'
        : `held while used, returned after ${Math.round(idleReturnMs / 60_000)} min idle`,
    sessions: sessions.length,
    cells: 0,
    acquisitions: 0,
    heldDeviceHours: 0,
    busyDeviceHours: 0,
    medianWaitSeconds: 0,
    p90WaitSeconds: 0,
    cellDelayHours: 0,
    doubleAllocations: 0
  };
  const events = new Private.EventQueue();
  const waits: number[] = [];
  const heldSince = new Map<string, number>();
  const holders = new Map<string, string>();
  let heldMs = 0;
  let busyMs = 0;
  let delayMs = 0;

  scheduler.on('placed', (key, placement) => {
    heldSince.set(key, clock.now);
    for (const deviceId of placement.deviceIds) {
      const device = `${placement.workerId}/${deviceId}`;
      if (holders.has(device)) {
        result.doubleAllocations++;
      }
      holders.set(device, key);
    }
  });
  scheduler.on('released', (key, placement) => {
    const since = heldSince.get(key)!;
    heldSince.delete(key);
    heldMs += clock.now - since;
    const session = Private.sessionOf(key, sessions);
    usage.add(session.user, (clock.now - since) / 1000, clock.now);
    for (const deviceId of placement.deviceIds) {
      holders.delete(`${placement.workerId}/${deviceId}`);
    }
  });
  // A queued kernel got its device: the cell (or the session) that waited goes on.
  scheduler.on('assigned', key => {
    const session = Private.sessionOf(key, sessions);
    waits.push(clock.now - session.askedAt!);
    session.askedAt = undefined;
    session.holding = key;
    if (session.cellWaiting) {
      session.cellWaiting = false;
      startCell(session);
    }
  });

  /** Ask for a device for a session; true when it holds one now. */
  const acquire = (session: Private.ISession): boolean => {
    const key = `${session.id}#${session.acquisitions++}`;
    result.acquisitions++;
    session.askedAt = clock.now;
    const answer = scheduler.request(
      key,
      { kind: 'gpu', count: 1 },
      undefined,
      session.user
    );
    if (answer.state === 'assigned') {
      waits.push(0);
      session.askedAt = undefined;
      session.holding = key;
      return true;
    }
    return false;
  };
  const release = (session: Private.ISession): void => {
    const key = session.holding;
    session.holding = undefined;
    if (key !== undefined) {
      scheduler.release(key);
    }
  };
  const startCell = (session: Private.ISession): void => {
    const cell = session.cells[session.next];
    delayMs += clock.now - session.plannedAt;
    session.running = true;
    result.cells++;
    busyMs += cell.runMs;
    events.at(clock.now + cell.runMs, () => endCell(session));
  };
  const planCell = (session: Private.ISession): void => {
    if (session.holding !== undefined) {
      startCell(session);
    } else if (idleReturnMs !== undefined) {
      if (acquire(session)) {
        startCell(session);
      } else {
        session.cellWaiting = true;
      }
    } else {
      // Held from open to close: the device is on its way since the notebook opened.
      session.cellWaiting = true;
    }
  };
  const endCell = (session: Private.ISession): void => {
    session.running = false;
    const cell = session.cells[session.next++];
    session.lastEnd = clock.now;
    if (session.next === session.cells.length) {
      events.at(clock.now + session.tailMs, () => release(session));
      return;
    }
    if (idleReturnMs !== undefined && idleReturnMs > 0) {
      const endedAt = clock.now;
      events.at(clock.now + idleReturnMs, () => {
        if (
          session.holding !== undefined &&
          !session.running &&
          session.lastEnd === endedAt
        ) {
          release(session);
        }
      });
    }
    session.plannedAt = clock.now + cell.thinkAfterMs;
    events.at(session.plannedAt, () => planCell(session));
  };

  for (const session of sessions) {
    events.at(session.openAt, () => {
      session.plannedAt = session.openAt + session.readMs;
      if (idleReturnMs === undefined) {
        acquire(session);
      }
      events.at(session.plannedAt, () => planCell(session));
    });
  }
  for (let event = events.pop(); event; event = events.pop()) {
    clock.now = event.at;
    event.run();
  }
  waits.sort((a, b) => a - b);
  result.heldDeviceHours = heldMs / 3600_000;
  result.busyDeviceHours = busyMs / 3600_000;
  result.medianWaitSeconds = percentile(waits, 0.5) / 1000;
  result.p90WaitSeconds = percentile(waits, 0.9) / 1000;
  result.cellDelayHours = delayMs / 3600_000;
  return result;
}

/** Module-private helpers. */
namespace Private {
  /** One cell: how long it runs, and how long its person thinks after it. */
  export interface ICell {
    runMs: number;
    thinkAfterMs: number;
  }

  /** One opened notebook and where its replay stands. */
  export interface ISession {
    id: string;
    user: string;
    openAt: number;
    /** Reading before the first cell. */
    readMs: number;
    cells: ICell[];
    /** Open after the last cell, until closed. */
    tailMs: number;
    next: number;
    plannedAt: number;
    lastEnd: number;
    running: boolean;
    cellWaiting: boolean;
    holding: string | undefined;
    askedAt: number | undefined;
    acquisitions: number;
  }

  const MINUTE = 60_000;

  /** The day's notebooks, opening time first. */
  export function workload(users: number, random: () => number): ISession[] {
    const day = Date.UTC(2026, 0, 5, 8);
    const normal = gaussian(random);
    const logNormal = (median: number, sigma: number) =>
      median * Math.exp(sigma * normal());
    const sessions: ISession[] = [];
    for (let u = 0; u < users; u++) {
      const count = 1 + (random() < 0.5 ? 1 : 0) + (random() < 0.2 ? 1 : 0);
      for (let s = 0; s < count; s++) {
        const cells: ICell[] = [];
        const n = 3 + Math.round(logNormal(15, 0.8));
        for (let c = 0; c < n; c++) {
          cells.push({
            runMs:
              random() < 1 / 12
                ? logNormal(8 * MINUTE, 0.7)
                : logNormal(10_000, 1),
            thinkAfterMs:
              random() < 1 / 12
                ? logNormal(40 * MINUTE, 0.5)
                : logNormal(MINUTE, 1.2)
          });
        }
        sessions.push({
          id: `u${u}-s${s}`,
          user: `user-${u}`,
          openAt: day + Math.floor(random() * 9 * 60) * MINUTE,
          readMs: logNormal(2 * MINUTE, 1),
          cells,
          tailMs: Math.min(logNormal(30 * MINUTE, 1.2), 8 * 60 * MINUTE),
          next: 0,
          plannedAt: 0,
          lastEnd: 0,
          running: false,
          cellWaiting: false,
          holding: undefined,
          askedAt: undefined,
          acquisitions: 0
        });
      }
    }
    return sessions.sort((a, b) => a.openAt - b.openAt);
  }

  /** The session a scheduler key (`u3-s1#2`) is for. */
  export function sessionOf(key: string, sessions: ISession[]): ISession {
    const id = key.slice(0, key.indexOf('#'));
    let session = index.get(sessions)?.get(id);
    if (!session) {
      const byId = new Map(sessions.map(s => [s.id, s]));
      index.set(sessions, byId);
      session = byId.get(id)!;
    }
    return session;
  }
  const index = new WeakMap<ISession[], Map<string, ISession>>();

  /** Events by time (then by when they were added): a binary heap. */
  export class EventQueue {
    at(at: number, run: () => void): void {
      const heap = this._heap;
      heap.push({ at, seq: this._seq++, run });
      let i = heap.length - 1;
      while (i > 0) {
        const parent = (i - 1) >> 1;
        if (!earlier(heap[i], heap[parent])) {
          break;
        }
        [heap[i], heap[parent]] = [heap[parent], heap[i]];
        i = parent;
      }
    }

    pop(): { at: number; run: () => void } | undefined {
      const heap = this._heap;
      const top = heap[0];
      const last = heap.pop();
      if (heap.length > 0 && last) {
        heap[0] = last;
        let i = 0;
        for (;;) {
          const l = 2 * i + 1;
          const r = l + 1;
          let m = i;
          if (l < heap.length && earlier(heap[l], heap[m])) {
            m = l;
          }
          if (r < heap.length && earlier(heap[r], heap[m])) {
            m = r;
          }
          if (m === i) {
            break;
          }
          [heap[i], heap[m]] = [heap[m], heap[i]];
          i = m;
        }
      }
      return top;
    }

    private _heap: { at: number; seq: number; run: () => void }[] = [];
    private _seq = 0;
  }

  function earlier(
    a: { at: number; seq: number },
    b: { at: number; seq: number }
  ): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }
}
