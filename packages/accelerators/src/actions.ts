/**
 * What a user does with a notebook's accelerator (change it, apply the notebook's saved choice,
 * measure its speed), as `NotebookActions` holds what a user does with cells: the plugins of
 * `@ferry/accelerators-extension` only wire commands, toolbar items and events to these.
 * One file, just over 500 lines: the actions share their checks and messages.
 */

import { showErrorMessage } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import type { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel } from '@jupyterlab/services';
import type { PartialJSONObject } from '@lumino/coreutils';
import type { RestSchemas } from '@ferry/rest-contract';
import { KernelMessage, ServerConnection } from '@jupyterlab/services';
import { nullTranslator, type ITranslator } from '@jupyterlab/translation';
import { benchmarkCode, formatBenchmark, parseBenchmark } from './benchmark';
import { chooseAccelerator } from './dialog';
import { gatewayProblem } from './gateway';
import {
  acceleratorKernelspecName,
  kernelspecAccelerator
} from './kernelspecs';
import {
  formatAccelerator,
  formatAcceleratorSpec,
  formatStatus
} from './labels';
import {
  kernelMatches,
  nearestOffer,
  readNotebookAccelerator,
  readNotebookEnvironment,
  toNotebookMetadata
} from './metadata';
import type { IAcceleratorRequest } from './models';
import type { AcceleratorPanel } from './panel';
import type { IAcceleratorManager } from './tokens';

/**
 * The accelerator actions of a notebook.
 */
export namespace AcceleratorActions {
  /**
   * Open a terminal beside the notebook's kernel: on its worker, with its devices, environment and
   * working directory (Ferry's `POST /api/terminals` with `{"kernel": id}`).
   *
   * @param panel - The notebook whose kernel the terminal runs beside.
   * @returns The terminal's name, for JupyterLab's `terminal:open`; undefined when none was opened
   *   (the user was told why).
   */
  export async function openTerminal(
    panel: NotebookPanel
  ): Promise<string | undefined> {
    const kernel = panel.sessionContext.session?.kernel;
    const title = 'No terminal beside this kernel';
    if (!kernel) {
      await showErrorMessage(title, 'This notebook has no kernel running.');
      return undefined;
    }
    const settings = kernel.serverSettings;
    const url = URLExt.join(settings.baseUrl, 'api/terminals');
    const response = await ServerConnection.makeRequest(
      url,
      { method: 'POST', body: JSON.stringify({ kernel: kernel.id }) },
      settings
    );
    if (response.status !== 200) {
      const error = await ServerConnection.ResponseError.create(response);
      await showErrorMessage(title, error.message);
      return undefined;
    }
    const model = (await response.json()) as RestSchemas['Terminal'];
    if (model.kernel !== kernel.id) {
      // A server that is not Ferry (jupyter_server in front of it) opened a terminal of its own.
      await ServerConnection.makeRequest(
        URLExt.join(url, encodeURIComponent(model.name)),
        { method: 'DELETE' },
        settings
      );
      await showErrorMessage(
        title,
        'This server opens terminals on its own host only: open the lab Ferry serves to get a terminal beside the kernel.'
      );
      return undefined;
    }
    return model.name;
  }

  /**
   * Call `callback` with the panel's kernel id now and whenever it changes.
   *
   * @param panel - The notebook followed.
   * @param callback - Called with the kernel id, or `null` while it has none.
   * @returns A function that stops following.
   */
  export function followKernel(
    panel: NotebookPanel,
    callback: (kernelId: string | null) => void
  ): () => void {
    const context = panel.sessionContext;
    const update = () => callback(context.session?.kernel?.id ?? null);
    context.kernelChanged.connect(update);
    context.sessionChanged.connect(update);
    update();
    return () => {
      context.kernelChanged.disconnect(update);
      context.sessionChanged.disconnect(update);
    };
  }

  /**
   * Run the matmul benchmark in the notebook's kernel (silently: nothing lands in the notebook) and
   * keep the result, beside the datasheet peak of the kernel's device, in the sidebar.
   *
   * @param notebook - The notebook whose kernel is measured.
   * @param manager - Where the kernel's device is read.
   * @param panel - The sidebar that shows the check running, then its result.
   */
  export async function benchmark(
    notebook: NotebookPanel,
    manager: IAcceleratorManager,
    panel: AcceleratorPanel
  ): Promise<void> {
    const kernel = notebook.sessionContext.session?.kernel;
    if (!kernel) {
      return;
    }
    const status = manager.kernelStatus(kernel.id);
    // Tied to the kernel and the devices it measures, not to the notebook's name at the time: the
    // panel names the kernel's notebook as it is now, and says when the kernel has moved since.
    const measuredAs = (now: typeof status) => ({
      kernelId: kernel.id,
      measuredOn: formatStatus(now),
      deviceIds: (now?.state === 'assigned' ? (now.devices ?? []) : []).map(
        device => device.id
      )
    });
    panel.setBenchmark({
      running: true,
      text: 'Measuring matmul speed…',
      ...measuredAs(status)
    });
    let output = '';
    let failure = '';
    try {
      const future = kernel.requestExecute({
        code: benchmarkCode(),
        silent: true,
        store_history: false
      });
      future.onIOPub = message => {
        if (KernelMessage.isStreamMsg(message)) {
          output += message.content.text;
        } else if (KernelMessage.isErrorMsg(message)) {
          failure = `${message.content.ename}: ${message.content.evalue}`;
        }
      };
      await future.done;
    } catch (error) {
      failure = failure || String(error);
    }
    const result = parseBenchmark(output);
    // What it ran on, as the gateway says now: a kernel that holds devices only while it runs
    // cells (`--hold-devices when-used`) took them for this one.
    let after = status;
    try {
      after =
        (await manager.client.getKernel(kernel.id)).accelerator ?? undefined;
    } catch {
      // The gateway did not answer: what the live model said before the run.
    }
    panel.setBenchmark({
      running: false,
      text: result
        ? formatBenchmark(
            result,
            after?.state === 'assigned' ? after.model : undefined
          )
        : `The benchmark printed no result. ${failure}`.trim(),
      ...measuredAs(after),
      at: Date.now()
    });
  }

  /**
   * When a notebook opens, ask again for the accelerator (and environment) its metadata names:
   * Ferry's own choice moves the kernel onto it at once (same id), in its environment; a Colab or Kaggle choice opens the picker on the nearest
   * offer, since the user must accept a substitute. Does nothing where Ferry cannot be reached.
   *
   * @param panel - The notebook just opened.
   * @param manager - Where Ferry is, and what it offers.
   *
   * #### Notes
   * A kernel started from an accelerator kernelspec (`python3.gpu-h100-x1`, picked in JupyterLab's
   * kernel list, or where this extension was not installed) runs on what its name says: that is
   * the user's latest choice, so it is saved as the notebook's instead of undone.
   */
  export async function applyNotebookChoice(
    panel: NotebookPanel,
    manager: IAcceleratorManager
  ): Promise<void> {
    await panel.context.ready;
    const choice = panel.model
      ? readNotebookAccelerator(panel.model.metadata)
      : null;
    const environment = panel.model
      ? readNotebookEnvironment(panel.model.metadata)
      : null;
    if (!choice && !environment) {
      return;
    }
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel || panel.isDisposed) {
      return;
    }
    try {
      const model = await manager.client.getKernel(kernel.id);
      // A kernel model without Ferry's field comes from a server that cannot place kernels.
      if (!model.accelerator) {
        return;
      }
      const inEnvironment = (model.environment ?? null) === environment;
      if (!choice) {
        // Only an environment: the kernel goes there on what it runs on now.
        if (!inEnvironment) {
          await Private.moveKernel(
            kernel,
            manager,
            model.accelerator,
            environment
          );
        }
        return;
      }
      if (kernelMatches(model.accelerator, choice.request) && inEnvironment) {
        return;
      }
      const own = kernelspecAccelerator(
        panel.sessionContext.specsManager.specs?.kernelspecs[model.name]
      );
      if (own) {
        if (panel.model && !panel.isDisposed) {
          Private.saveChoice(panel.model, own.accelerator);
        }
        return;
      }
      if (choice.source === 'ferry') {
        await Private.moveKernel(kernel, manager, choice.request, environment);
      } else if (await Private.modelReady(manager)) {
        await changeAccelerator(panel, manager);
      }
    } catch (error) {
      console.warn(
        `Could not start ${panel.context.path} on ${choice ? formatAccelerator(choice.request) : ''} ${environment ? `in ${environment}` : ''}`.trim(),
        error
      );
    }
  }

  /**
   * Ask which accelerator (and, where the gateway declares them, which environment) to run on,
   * store both in the notebook's metadata and restart the kernel there. A Colab or Kaggle notebook
   * starts on the nearest offer, with a note saying what it asked.
   *
   * @param panel - The notebook whose accelerator changes.
   * @param manager - Where Ferry is, and what it offers.
   */
  export async function changeAccelerator(
    panel: NotebookPanel,
    manager: IAcceleratorManager,
    translator: ITranslator = nullTranslator
  ): Promise<void> {
    const trans = translator.load('ferry');
    const model = panel.model;
    if (!model) {
      return;
    }
    if (!(await Private.modelReady(manager))) {
      await showErrorMessage(
        'Accelerators unavailable',
        gatewayProblem(
          manager.connectionError,
          manager.client.serverSettings.baseUrl
        ) ??
          "Ferry's accelerators did not answer yet: is this JupyterLab served by Ferry, or is its gateway URL set in Settings → Ferry Accelerators?"
      );
      return;
    }
    const kernelId = panel.sessionContext.session?.kernel?.id;
    const status = kernelId ? manager.kernelStatus(kernelId) : undefined;
    const kernelEnvironment = kernelId
      ? Private.kernelEnvironment(manager, kernelId)
      : null;
    const choice = readNotebookAccelerator(model.metadata);
    let value: IAcceleratorRequest | null = status ?? null;
    let note: string | undefined;
    if (choice) {
      const match = nearestOffer(choice.request, manager.offers);
      if (!value && match) {
        value = match.offer.request;
      }
      if (choice.source !== 'ferry') {
        note = trans
          .__(
            'This notebook asks for %1. %2',
            choice.original,
            match?.reason ?? ''
          )
          .trim();
      } else if (match?.reason) {
        note = match.reason;
      }
    }
    if (!value && kernelId) {
      value = { kind: 'cpu', count: 0 };
    }
    if (status?.state === 'queued' || status?.state === 'starting') {
      note = [trans.__('This kernel is %1.', formatStatus(status)), note]
        .filter(Boolean)
        .join(' ');
    }
    const chosen = await chooseAccelerator({
      manager,
      kernelId,
      value,
      note,
      warning: kernelId
        ? manager.model?.environments?.length
          ? trans.__(
              'Changing the environment or accelerator restarts the kernel: its variables and everything else in its memory are lost.'
            )
          : trans.__(
              'Changing the accelerator restarts the kernel: its variables and everything else in its memory are lost.'
            )
        : undefined,
      label: trans.__('Accelerator for %1', panel.title.label),
      translator,
      environment: kernelId
        ? kernelEnvironment
        : readNotebookEnvironment(model.metadata)
    });
    if (!chosen) {
      return;
    }
    const { request, environment } = chosen;
    Private.saveChoice(model, request, environment);
    const current = kernelId ? manager.kernelStatus(kernelId) : undefined;
    if (
      kernelId &&
      environment === Private.kernelEnvironment(manager, kernelId) &&
      (current
        ? kernelMatches(current, request)
        : request.kind === 'cpu' && !!manager.model)
    ) {
      // Already there (or waiting for it): keep the kernel and its state.
      return;
    }
    try {
      await Private.placeKernel(panel, manager, request, environment);
    } catch (error) {
      await showErrorMessage(
        `Could not start ${panel.title.label} on ${Private.describe(manager, request, environment)}`,
        error as Error
      );
    }
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** Whether the manager has a picture of the cluster, waiting a little for the first one. */
  export async function modelReady(
    manager: IAcceleratorManager
  ): Promise<boolean> {
    if (!manager.model && !manager.connectionError) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        manager.ready,
        new Promise(resolve => (timer = setTimeout(resolve, 5000)))
      ]);
      clearTimeout(timer);
    }
    return !!manager.model;
  }

  /** Save a choice as the notebook's, keeping its other Ferry settings. */
  export function saveChoice(
    model: INotebookModel,
    request: IAcceleratorRequest,
    environment?: string | null
  ): void {
    const ferry = model.getMetadata('ferry');
    const saved: PartialJSONObject = {
      ...(ferry && typeof ferry === 'object' && !Array.isArray(ferry)
        ? ferry
        : {}),
      ...toNotebookMetadata(request)
    };
    // Left out: the environment saved stays; null: none.
    if (environment === null) {
      delete saved.environment;
    } else if (environment !== undefined) {
      saved.environment = environment;
    }
    model.setMetadata('ferry', saved);
  }

  /** The environment a kernel runs in, from the live model (`null`: none). */
  export function kernelEnvironment(
    manager: IAcceleratorManager,
    kernelId: string
  ): string | null {
    return manager.model?.kernelEnvironments?.[kernelId] ?? null;
  }

  /** `PyTorch · GPU · H100 × 1`, or the accelerator alone outside any environment. */
  export function describe(
    manager: IAcceleratorManager,
    request: IAcceleratorRequest,
    environment: string | null
  ): string {
    const name =
      environment &&
      (manager.model?.environments?.find(e => e.name === environment)
        ?.displayName ??
        environment);
    return name
      ? `${name} · ${formatAccelerator(request)}`
      : formatAccelerator(request);
  }

  /**
   * Run the notebook's kernel on `request`: its kernel moves there under the same id (Ferry's
   * restart with an accelerator); a notebook without a kernel starts one there.
   *
   * #### Notes
   * A new kernel asks with `KERNEL_ACCELERATOR` (and `KERNEL_ENVIRONMENT`) in its environment. A Jupyter server in front of
   * Ferry (`jupyter server --gateway-url`, 1.23) drops the environment a browser sends, so a kernel
   * that came up elsewhere is moved too: Ferry's endpoint is reached directly, with the gateway URL
   * and token of the manager's client.
   *
   * A kernel started from an accelerator kernelspec (`python3.gpu-h100-x1`) is named after what it
   * runs on, so it is not moved: the notebook changes to the kernelspec of the new choice (or the
   * plain one, `python3`, where none is listed), as JupyterLab's own kernel picker would, and
   * JupyterLab then shows and saves that kernelspec.
   */
  export async function placeKernel(
    panel: NotebookPanel,
    manager: IAcceleratorManager,
    request: IAcceleratorRequest,
    environment: string | null
  ): Promise<void> {
    // A notebook just opened may still be starting its kernel: move that one, not a second.
    await panel.sessionContext.ready;
    const context = panel.sessionContext;
    const current = context.session?.kernel;
    const specs = context.specsManager.specs;
    const from = kernelspecAccelerator(
      specs?.kernelspecs[current?.name ?? context.kernelPreference.name ?? '']
    );
    if (current && !from) {
      await moveKernel(current, manager, request, environment);
      return;
    }
    const base = from?.base ?? context.kernelPreference.name;
    await context.changeKernel({
      name: (base && acceleratorKernelspecName(specs, base, request)) ?? base,
      env: {
        KERNEL_ACCELERATOR: formatAcceleratorSpec(request),
        // The environment chosen (saved as metadata.ferry.environment) goes with it.
        ...(environment ? { KERNEL_ENVIRONMENT: environment } : {})
      }
    } as Partial<Kernel.IModel>);
    const started = panel.sessionContext.session?.kernel;
    if (!started) {
      return;
    }
    const model = await manager.client.getKernel(started.id);
    if (
      !kernelMatches(model.accelerator, request) ||
      (model.environment ?? null) !== environment
    ) {
      await moveKernel(started, manager, request, environment);
    }
  }

  /**
   * Move a kernel to other devices (or into another environment: `null` for none, left out to
   * keep its own), keeping its id and its connection.
   *
   * #### Notes
   * Ferry keeps the kernel's websockets open across the move and tells them `starting`, then
   * `idle` once the new process runs (not `restarting`, which JupyterLab takes for a crash); what
   * a client sends meanwhile waits in Ferry and reaches the new process, whose replies come back on
   * the same websocket. So the connection is left as it is: reconnecting it here would close the
   * websocket just as those replies arrive (a cell run during the move then stayed at [*]), and
   * behind jupyter_server 1.23 a fresh websocket can lose the first message sent on it.
   */
  export async function moveKernel(
    kernel: Kernel.IKernelConnection,
    manager: IAcceleratorManager,
    request: IAcceleratorRequest,
    environment?: string | null
  ): Promise<void> {
    await manager.client.moveKernel(kernel.id, request, environment);
  }
}
