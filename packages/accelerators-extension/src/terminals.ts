/**
 * Terminals that say where they run: each terminal tab is titled with its accelerator and host
 * ("H100 ×1 on node-a · 2", not "Terminal 2"); a terminal beside a kernel that moved to other
 * devices is not closed in silence: the user is told, and offered a new one beside the kernel where
 * it runs now. A tab restored after a gateway restart is reopened where it ran (the gateway does
 * that); when it cannot be, the page says why.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import {
  ITranslator,
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { Widget } from '@lumino/widgets';
import type { RestSchemas } from '@ferry/rest-contract';

type TerminalModel = RestSchemas['Terminal'];
type KernelModel = RestSchemas['Kernel'];

/** JupyterLab's command that opens a terminal by name (terminal-extension). */
const OPEN = 'terminal:open';

/** JupyterLab's command that makes a terminal tab, by name when it restores one. */
const CREATE = 'terminal:create-new';

/** Where a terminal ran, as the page remembers it. */
export interface ITerminalPlace {
  accelerator?: string;
  kernel?: string;
  worker?: string;
  devices?: string[];
}

/** "H100 ×1", "GPU ×2", "CPU" from an accelerator spec (`gpu:H100:1`, `tpu::4`, `cpu`). */
export function acceleratorWords(spec: string | undefined): string {
  if (!spec || spec === 'cpu' || spec.startsWith('cpu')) {
    return 'CPU';
  }
  if (spec.startsWith('offer:')) {
    return spec.slice('offer:'.length);
  }
  // `kind:count` or `kind:model:count[:profile]` (accelerator-vocabulary's formatAcceleratorSpec).
  const parts = spec.split(':');
  const [kind, model, count] =
    parts.length === 2 ? [parts[0], '', parts[1]] : parts;
  const what = model || kind.toUpperCase();
  return count ? `${what} ×${count}` : what;
}

/** A terminal tab's title: its accelerator, its host and its name. */
export function terminalTitle(
  model: Pick<TerminalModel, 'name' | 'accelerator' | 'worker' | 'state'>,
  trans: TranslationBundle = nullTranslator.load('ferry')
): string {
  const what = acceleratorWords(model.accelerator);
  if (!model.worker) {
    return trans.__('%1 (waiting) · %2', what, model.name);
  }
  return trans.__('%1 on %2 · %3', what, model.worker, model.name);
}

/** The tab's words in full, for its tooltip. */
function terminalCaption(
  model: TerminalModel,
  trans: TranslationBundle
): string {
  const where = model.worker
    ? trans.__('on %1', model.worker)
    : trans.__('waiting for its devices');
  const beside = model.kernel
    ? trans.__(', beside kernel %1', model.kernel)
    : '';
  const devices = model.devices?.length
    ? trans.__(' (devices %1)', model.devices.join(', '))
    : '';
  return trans.__(
    'Terminal %1: %2 %3%4%5',
    model.name,
    acceleratorWords(model.accelerator),
    where,
    devices,
    beside
  );
}

/** Ferry's terminal and kernel API, with the page's credentials. */
class TerminalsClient {
  constructor(readonly settings: ServerConnection.ISettings) {}

  async list(): Promise<TerminalModel[]> {
    return (await this._json<TerminalModel[]>('GET', 'api/terminals')) ?? [];
  }

  get(name: string): Promise<TerminalModel | undefined> {
    return this._json('GET', `api/terminals/${encodeURIComponent(name)}`);
  }

  kernel(id: string): Promise<KernelModel | undefined> {
    return this._json('GET', `api/kernels/${encodeURIComponent(id)}`);
  }

  /** Opens a terminal; throws with the server's message when it cannot. */
  async open(body: {
    name?: string;
    kernel?: string;
    accelerator?: string;
  }): Promise<TerminalModel> {
    const response = await ServerConnection.makeRequest(
      URLExt.join(this.settings.baseUrl, 'api/terminals'),
      { method: 'POST', body: JSON.stringify(body) },
      this.settings
    );
    if (!response.ok) {
      throw await ServerConnection.ResponseError.create(response);
    }
    return (await response.json()) as TerminalModel;
  }

  /** The JSON of a GET; undefined for a 404. */
  private async _json<T>(method: string, path: string): Promise<T | undefined> {
    const response = await ServerConnection.makeRequest(
      URLExt.join(this.settings.baseUrl, path),
      { method },
      this.settings
    );
    if (response.status === 404) {
      return undefined;
    }
    if (!response.ok) {
      throw await ServerConnection.ResponseError.create(response);
    }
    return (await response.json()) as T;
  }
}

/** A terminal tab as JupyterLab's terminal extension makes it (no import of its package needed). */
interface ITerminalTab extends Widget {
  content: Widget & {
    session?: {
      name: string;
      disposed: { connect(fn: () => void): void };
    };
  };
}

/** Whether a main-area widget is a terminal tab. */
function isTerminalTab(widget: Widget): widget is ITerminalTab {
  const content = (widget as unknown as Partial<ITerminalTab>).content;
  return (
    !!content &&
    content.hasClass?.('jp-Terminal') === true &&
    typeof content.session?.name === 'string'
  );
}

/** A kernel's accelerator as a spec (`gpu:H100:1`, `cpu`). */
function kernelSpec(kernel: KernelModel): string {
  const status = kernel.accelerator;
  return !status || status.kind === 'cpu'
    ? 'cpu'
    : `${status.kind}:${status.model ?? ''}:${status.count ?? 1}`;
}

/** Whether a kernel (landed) now runs elsewhere than the terminal beside it did. */
export function kernelMoved(
  kernel: KernelModel | undefined,
  place: ITerminalPlace
): boolean {
  if (!kernel || kernel.execution_state === 'dead' || !place.worker) {
    return false;
  }
  const status = kernel.accelerator;
  const worker = status?.workerName ?? status?.worker;
  const devices = (status?.devices ?? []).map(d => d.id).sort();
  const before = [...(place.devices ?? [])].sort();
  return (
    acceleratorWords(kernelSpec(kernel)) !==
      acceleratorWords(place.accelerator) ||
    (worker !== undefined && worker !== place.worker) ||
    (before.length > 0 && devices.join(',') !== before.join(','))
  );
}

/**
 * Whether a kernel may still be on its way: a move stops its process first (its terminals close
 * then, while its model still names the old devices), then it waits for and starts on the new ones.
 */
function landing(kernel: KernelModel): boolean {
  const state = kernel.accelerator?.state;
  return (
    state === 'queued' ||
    state === 'starting' ||
    (kernel.execution_state !== 'idle' && kernel.execution_state !== 'dead')
  );
}

/** Terminal tabs named by where they run; moved kernels and restores told, not silent. */
export const terminalsPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/accelerators-extension:terminals',
  description:
    'Titles terminal tabs with their accelerator and host; offers to reopen a terminal beside a kernel that moved.',
  autoStart: true,
  optional: [ITranslator],
  activate: (app: JupyterFrontEnd, translator: ITranslator | null): void => {
    const trans = (translator ?? nullTranslator).load('ferry');
    const client = new TerminalsClient(app.serviceManager.serverSettings);
    /** Where each terminal ran when last seen (a move is told by comparing with it). */
    const book = new Map<string, ITerminalPlace>();
    const models = new Map<string, TerminalModel>();
    const watched = new WeakSet<Widget>();

    const tabs = (): ITerminalTab[] =>
      Array.from(app.shell.widgets('main')).filter(isTerminalTab);

    const title = (tab: ITerminalTab, model: TerminalModel) => {
      const label = terminalTitle(model, trans);
      if (tab.content.title.label !== label) {
        tab.content.title.label = label;
      }
      tab.content.title.caption = terminalCaption(model, trans);
      tab.node.dataset.ferryAccelerator = model.accelerator ?? 'cpu';
    };

    /** Titles every terminal tab and remembers where each runs. */
    const refresh = async (): Promise<void> => {
      let listed: TerminalModel[];
      try {
        listed = await client.list();
      } catch {
        return;
      }
      models.clear();
      for (const model of listed) {
        models.set(model.name, model);
        if (model.worker) {
          book.set(model.name, {
            accelerator: model.accelerator,
            kernel: model.kernel,
            worker: model.worker,
            devices: model.devices
          });
        }
      }
      const open = new Set<string>();
      for (const tab of tabs()) {
        const name = tab.content.session!.name;
        open.add(name);
        const model = models.get(name);
        if (model) {
          title(tab, model);
        }
        watch(tab);
      }
      // A place nobody will restore (no tab, no terminal) is forgotten.
      for (const name of [...book.keys()]) {
        if (!open.has(name) && !models.has(name)) {
          book.delete(name);
        }
      }
    };

    /** When a tab's terminal ends under it, say why, and offer what can be done. */
    const watch = (tab: ITerminalTab) => {
      if (watched.has(tab)) {
        return;
      }
      watched.add(tab);
      // JupyterLab's own title comes back on reconnects: ours again, each time.
      tab.content.title.changed.connect(() => {
        const model = models.get(tab.content.session?.name ?? '');
        if (model && tab.content.title.label !== terminalTitle(model, trans)) {
          title(tab, model);
        }
      });
      const name = tab.content.session!.name;
      tab.content.session!.disposed.connect(() => void ended(name));
    };

    const ended = async (name: string): Promise<void> => {
      const place = book.get(name);
      if (!place?.kernel) {
        return;
      }
      let still: TerminalModel | undefined;
      try {
        still = await client.get(name);
      } catch {
        // The server is away: nothing can be said of the kernel.
        return;
      }
      if (still) {
        // Closed by the user: the terminal runs on.
        return;
      }
      book.delete(name);
      // A move stops the kernel's process first (its terminals close then, while its model still
      // names the old devices), then starts it on the new ones: watch it for a while to see.
      let kernel: KernelModel | undefined;
      for (let tries = 0; ; tries++) {
        kernel = await client.kernel(place.kernel).catch(() => undefined);
        if (!kernel || kernel.execution_state === 'dead') {
          return;
        }
        if (!landing(kernel) && kernelMoved(kernel, place)) {
          break;
        }
        if (tries >= 60) {
          return;
        }
        await new Promise(resolve => setTimeout(resolve, 500));
      }
      const now = kernel?.accelerator;
      const where = trans.__(
        '%1 on %2',
        acceleratorWords(kernelSpec(kernel!)),
        now?.workerName ?? now?.worker ?? place.worker ?? '?'
      );
      Notification.warning(
        trans.__(
          'Terminal %1 was closed: its kernel moved to %2. A terminal runs beside a kernel on its host, so it could not follow.',
          name,
          where
        ),
        {
          autoClose: false,
          actions: [
            {
              label: trans.__('Reopen beside the kernel'),
              caption: trans.__(
                'Open a new terminal beside the kernel, on %1',
                where
              ),
              callback: () => void reopen(place.kernel!)
            }
          ]
        }
      );
    };

    const reopen = async (kernel: string): Promise<void> => {
      try {
        const model = await client.open({ kernel });
        await app.commands.execute(OPEN, { name: model.name });
        void refresh();
      } catch (error) {
        Notification.error(
          trans.__(
            'No terminal beside the kernel: %1',
            (error as Error).message
          ),
          { autoClose: false }
        );
      }
    };

    // A tab opened by name (from a link, a notice, the layout restorer) is titled at once.
    const execute = app.commands.execute.bind(app.commands);
    app.commands.execute = async (id, args) => {
      let result: unknown;
      try {
        result = await execute(id, args);
      } catch (error) {
        // A restored tab whose terminal the restarted gateway could not reopen where it ran (410):
        // say so, rather than a tab that vanishes.
        const status = (error as { response?: Response }).response?.status;
        if ((id === OPEN || id === CREATE) && status === 410) {
          Notification.warning((error as Error).message, { autoClose: false });
        }
        throw error;
      }
      if (id === OPEN || id === CREATE) {
        void refresh();
      }
      return result;
    };

    void app.restored.then(() => {
      void refresh();
      // Titles follow a terminal that waited for its devices, and new tabs.
      const timer = setInterval(() => {
        if (tabs().length > 0) {
          void refresh();
        }
      }, 3000);
      window.addEventListener('beforeunload', () => clearInterval(timer));
    });
  }
};
