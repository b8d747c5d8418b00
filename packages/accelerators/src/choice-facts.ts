/**
 * What the picker says of each choice besides whether it starts now: its specification (device
 * memory, host cores and memory, as Colab's runtime types and Gradient's machine list do) and who
 * holds its devices now, named only as far as the viewer may know it.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import {
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import { formatGiB } from './labels';
import type { IAccelerators, IDevice, IHolder, IWorker } from './models';
import type { IAcceleratorOffer } from './offers';

/** What the picker shows of a choice under its name. */
export interface IChoiceFacts {
  /** `2 × 80.0 GiB GPU memory · host: 16 cores, 125.7 GiB memory`. */
  spec?: string;
  /** Who holds its devices now: `In use by you (train.ipynb), another user`. */
  heldBy?: string;
}

/**
 * Names a holder for this viewer: their own kernels and terminals as theirs, others by user name
 * only for an admin (the gateway answers `/api/admin/holders` to admins alone), else "another
 * user".
 */
export type HolderNamer = (holder: IHolder) => string;

/**
 * The facts of `offer` from the live model: the devices of its type on connected workers (their
 * memory), the hosts those workers run on, and the holders of those devices.
 *
 * @param model - The `/api/accelerators` model.
 * @param offer - The choice.
 * @param nameHolder - How this viewer names a holder (`null`: not known yet, holders left out).
 */
export function choiceFacts(
  model: IAccelerators | null,
  offer: IAcceleratorOffer,
  nameHolder: HolderNamer | null,
  trans: TranslationBundle = nullTranslator.load('ferry')
): IChoiceFacts {
  const request = offer.request;
  if (!model || request.offer !== undefined) {
    // An engine's offer starts a worker of its own: nothing here describes it.
    return {};
  }
  const connected = model.workers.filter(worker => worker.connected);
  if (request.kind === 'cpu') {
    const host = Private.largestHost(
      connected.filter(worker => worker.acceptsCpu)
    );
    const text = host ? Private.hostText(host, trans) : '';
    return text ? { spec: text } : {};
  }
  const matching: { worker: IWorker; device: IDevice }[] = [];
  for (const worker of connected) {
    for (const device of worker.devices) {
      if (Private.sameType(device, request)) {
        matching.push({ worker, device });
      }
    }
  }
  if (matching.length === 0) {
    return {};
  }
  const facts: IChoiceFacts = {};
  const parts: string[] = [];
  const memory = Math.max(0, ...matching.map(m => m.device.memoryBytes ?? 0));
  if (memory > 0) {
    const count = request.count ?? 1;
    const kind = request.kind === 'tpu' ? 'TPU' : 'GPU';
    parts.push(
      count > 1
        ? trans.__('%1 × %2 %3 memory', count, formatGiB(memory), kind)
        : trans.__('%1 %2 memory', formatGiB(memory), kind)
    );
  }
  const host = Private.largestHost(
    [...new Set(matching.map(m => m.worker))].filter(
      worker =>
        worker.devices.filter(device => Private.sameType(device, request))
          .length >= (request.count ?? 1)
    )
  );
  const hostText = host ? Private.hostText(host, trans) : '';
  if (hostText) {
    parts.push(hostText);
  }
  if (parts.length) {
    facts.spec = parts.join(' · ');
  }
  const names = new Map<string, number>();
  const seen = new Set<string>();
  for (const { device } of nameHolder ? matching : []) {
    for (const holder of device.holders) {
      const key = `${holder.kind}:${holder.kind === 'kernel' ? holder.id : holder.name}`;
      if (seen.has(key)) {
        continue;
      }
      seen.add(key);
      const name = nameHolder!(holder);
      names.set(name, (names.get(name) ?? 0) + 1);
    }
  }
  if (names.size) {
    facts.heldBy = trans.__(
      'In use by %1',
      [...names]
        .map(([name, count]) => (count > 1 ? `${name} (×${count})` : name))
        .join(', ')
    );
  }
  return facts;
}

/**
 * How this viewer names holders: their own sessions' kernels by notebook, their terminals as
 * theirs, and, for an admin, others by user name (`GET /api/admin/holders`); anyone else's holder is
 * "another user". Asked of the gateway each time the picker opens.
 *
 * @param settings - The page's server settings.
 */
export async function fetchHolderNamer(
  settings: ServerConnection.ISettings,
  trans: TranslationBundle = nullTranslator.load('ferry')
): Promise<HolderNamer> {
  const get = async (path: string): Promise<unknown> => {
    try {
      const response = await ServerConnection.makeRequest(
        URLExt.join(settings.baseUrl, path),
        { method: 'GET' },
        settings
      );
      return response.ok ? await response.json() : undefined;
    } catch {
      return undefined;
    }
  };
  const [sessions, admin] = await Promise.all([
    get('api/sessions'),
    get('api/admin/holders')
  ]);
  const own = new Map<string, string>();
  for (const session of Array.isArray(sessions) ? sessions : []) {
    const id = session?.kernel?.id;
    if (typeof id === 'string' && typeof session.path === 'string') {
      own.set(id, session.path.split('/').pop() ?? session.path);
    }
  }
  const users = new Map<string, string>();
  const listed = (admin as { holders?: unknown } | undefined)?.holders;
  for (const entry of Array.isArray(listed) ? listed : []) {
    const id = entry?.holder?.id;
    if (typeof id === 'string' && typeof entry.user === 'string') {
      users.set(`${entry.holder.kind}:${id}`, entry.user);
    }
  }
  return holder => {
    if (holder.kind === 'terminal') {
      // Terminals holding devices of their own are listed to their owner alone.
      return (
        users.get(`terminal:${holder.name}`) ??
        trans.__('your terminal %1', holder.name)
      );
    }
    const notebook = own.get(holder.id);
    if (notebook) {
      return trans.__('you (%1)', notebook);
    }
    return users.get(`kernel:${holder.id}`) ?? trans.__('another user');
  };
}

/** The module-private parts. */
namespace Private {
  /** Whether `device` is of the type `request` asks for. */
  export function sameType(
    device: IDevice,
    request: IAcceleratorOffer['request']
  ): boolean {
    return (
      device.kind === request.kind &&
      (request.model === undefined ||
        device.model.toLowerCase() === request.model.toLowerCase()) &&
      (device.profile ?? '').toLowerCase() ===
        (request.profile ?? '').toLowerCase()
    );
  }

  /** The worker with the most host cores, among those that report their host. */
  export function largestHost(
    workers: IWorker[]
  ): NonNullable<IWorker['host']> | undefined {
    let best: NonNullable<IWorker['host']> | undefined;
    for (const worker of workers) {
      const host = worker.host;
      if (
        host &&
        (best === undefined ||
          (host.cpuCount ?? 0) > (best.cpuCount ?? 0) ||
          ((host.cpuCount ?? 0) === (best.cpuCount ?? 0) &&
            (host.memoryTotalBytes ?? 0) > (best.memoryTotalBytes ?? 0)))
      ) {
        best = host;
      }
    }
    return best;
  }

  /** `host: 16 cores, 125.7 GiB memory`. */
  export function hostText(
    host: NonNullable<IWorker['host']>,
    trans: TranslationBundle
  ): string {
    const parts: string[] = [];
    if (host.cpuCount) {
      parts.push(trans._n('%1 core', '%1 cores', host.cpuCount));
    }
    if (host.memoryTotalBytes) {
      parts.push(trans.__('%1 memory', formatGiB(host.memoryTotalBytes)));
    }
    return parts.length ? trans.__('host: %1', parts.join(', ')) : '';
  }
}
