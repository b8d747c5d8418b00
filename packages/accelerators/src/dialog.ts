/**
 * The "Change Accelerator" dialog: the picker with the gateway's live answers, in JupyterLab's
 * dialog.
 */

import { Dialog } from '@jupyterlab/apputils';
import {
  nullTranslator,
  type ITranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import {
  choiceFacts,
  fetchHolderNamer,
  type HolderNamer
} from './choice-facts';
import { deviceType, formatAccelerator, sameRequest } from './labels';
import type { IAcceleratorRequest } from './models';
import { environmentChoices } from './offers';
import { AcceleratorPicker } from './picker';
import type { IAcceleratorManager } from './tokens';

/**
 * What the user chose in the dialog: an accelerator, and the environment to run in.
 */
export interface IAcceleratorChoice {
  /** The accelerator (or offer). */
  request: IAcceleratorRequest;
  /** The environment (`null`: none, the worker's own kernelspec). */
  environment: string | null;
}

/**
 * The "Change Accelerator" dialog: the offers with live free counts, starting on `value`; where the
 * gateway declares environments, an environment menu above them (`PyTorch · GPU · H100 × 1`).
 *
 * @param options - The manager whose offers are listed, the current choice, and the words around.
 * @returns The chosen accelerator and environment, or `null` when the user cancels.
 *
 * #### Notes
 * The list is a radio group: arrow keys, Home and End move the choice, Enter restarts on it,
 * Escape cancels. Each choice's availability is the gateway's answer, asked again with each
 * update of the manager and each change of environment while the dialog is open.
 */
export async function chooseAccelerator(
  options: IChooseAcceleratorOptions
): Promise<IAcceleratorChoice | null> {
  const { manager, kernelId } = options;
  // What each choice would do is the gateway's answer, asked again whenever the picture changes.
  const offersIn = (environment: string | null) =>
    manager.offersFor(kernelId, environment);
  const environment = options.environment ?? null;
  const translator = options.translator ?? nullTranslator;
  const trans = translator.load('ferry');
  // Who holds what, named as far as this viewer may know (an admin sees user names): asked beside
  // the offers, never holding the dialog up; the holders show once the answer is in.
  let nameHolder: HolderNamer | null = null;
  const body = new AcceleratorPicker({
    translator,
    facts: offer => choiceFacts(manager.model, offer, nameHolder, trans),
    offers: await offersIn(environment),
    value: options.value,
    note: options.note,
    warning: options.warning,
    label: options.label,
    environments: environmentChoices(manager.model),
    environment
  });
  const dialog = new Dialog<IAcceleratorRequest | null>({
    title: options.purpose?.title ?? trans.__('Change Accelerator'),
    body,
    // Start on the chosen offer, so arrow keys move the choice at once.
    focusNodeSelector: '.jp-FerryPicker-radio[tabindex="0"]',
    buttons: [
      Dialog.cancelButton(),
      Dialog.okButton({
        label: Private.acceptLabel(body, kernelId, trans, options.purpose),
        caption:
          options.purpose?.caption ??
          (kernelId
            ? trans.__(
                'Restart the kernel on the chosen accelerator; its state is lost'
              )
            : trans.__('Start the kernel on the chosen accelerator'))
      })
    ]
  });
  // The accept button names what it does with the choice: "Restart on GPU · H100 × 1", "Keep".
  const relabel = () => {
    const button = dialog.node.querySelector<HTMLButtonElement>(
      '.jp-Dialog-button.jp-mod-accept'
    );
    const label = button?.querySelector<HTMLElement>('.jp-Dialog-buttonLabel');
    if (label) {
      const text = Private.acceptLabel(body, kernelId, trans, options.purpose);
      label.textContent = text;
      label.ariaLabel = text;
    }
  };
  let asked = 0;
  const refresh = () => {
    const ask = ++asked;
    offersIn(body.environment).then(
      offers => {
        // Only the latest answer counts; a later one may already have arrived.
        if (ask === asked && !body.isDisposed) {
          body.offers = offers;
          relabel();
        }
      },
      // The gateway did not answer (it restarts, the kernel is gone): keep the last answer.
      () => undefined
    );
  };
  void fetchHolderNamer(manager.client.serverSettings, trans).then(namer => {
    nameHolder = namer;
    if (!body.isDisposed) {
      body.offers = body.offers;
    }
  });
  manager.changed.connect(refresh);
  body.valueChanged.connect(relabel);
  body.environmentChanged.connect(refresh);
  try {
    const launched = dialog.launch();
    relabel();
    const result = await launched;
    return result.button.accept && result.value
      ? { request: result.value, environment: body.environment }
      : null;
  } finally {
    manager.changed.disconnect(refresh);
    body.valueChanged.disconnect(relabel);
    body.environmentChanged.disconnect(refresh);
  }
}

/**
 * The options of `chooseAccelerator`.
 */
export interface IChooseAcceleratorOptions {
  /** Where the offers come from. */
  manager: IAcceleratorManager;
  /** The choice the dialog starts on. */
  value: IAcceleratorRequest | null;
  /** How the notebook's own choice was read or translated. */
  note?: string;
  /** What choosing costs (the kernel's state). */
  warning?: string;
  /** The accessible name of the list. */
  label?: string;
  /**
   * What the choice is for when it is not a kernel's (a job's): the dialog's title, its accept
   * button's words for a choice ("GPU · H100 × 1") and that button's caption.
   */
  purpose?: {
    title: string;
    accept: (choice: string) => string;
    caption: string;
  };
  /** The environment the dialog starts on (`null`, the default: none). */
  environment?: string | null;
  /**
   * The kernel that would move, if any: the gateway answers for it (its own devices count as
   * free, its queue entry is not ahead of it, its current choice is marked).
   */
  kernelId?: string;
  /** Translates the dialog's words (JupyterLab's translator; English without one). */
  translator?: ITranslator;
}

/**
 * The module-private parts.
 */
namespace Private {
  /** What accepting the picker's choice does, in the words of its button. */
  export function acceptLabel(
    picker: AcceleratorPicker,
    kernelId: string | undefined,
    trans: TranslationBundle,
    purpose?: IChooseAcceleratorOptions['purpose']
  ): string {
    const value = picker.value;
    if (purpose) {
      return purpose.accept(value ? formatAccelerator(value) : trans.__('CPU'));
    }
    if (!value) {
      return kernelId ? trans.__('Restart') : trans.__('Start');
    }
    const offer = picker.offers.find(candidate =>
      sameRequest(candidate.request, deviceType(value))
    );
    if (offer?.current) {
      return trans.__('Keep');
    }
    const environment = picker.environments.find(
      e => e.name === picker.environment
    );
    const where = environment
      ? `${environment.displayName} · ${formatAccelerator(value)}`
      : formatAccelerator(value);
    return kernelId
      ? trans.__('Restart on %1', where)
      : trans.__('Start on %1', where);
  }
}
