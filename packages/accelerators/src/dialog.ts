/**
 * The "Change Accelerator" dialog: the picker with live free counts, in JupyterLab's dialog.
 */

import { Dialog } from '@jupyterlab/apputils';
import { formatAccelerator } from './labels';
import type { IAcceleratorRequest } from './models';
import { sameRequest } from './offers';
import { AcceleratorPicker } from './picker';
import type { IAcceleratorManager } from './tokens';

/**
 * The "Change Accelerator" dialog: the offers with live free counts, starting on `value`.
 *
 * @param options - The manager whose offers are listed, the current choice, and the words around.
 * @returns The chosen request, or `null` when the user cancels.
 *
 * #### Notes
 * The list is a radio group: arrow keys, Home and End move the choice, Enter restarts on it,
 * Escape cancels. The free counts follow the manager while the dialog is open.
 */
export async function chooseAccelerator(
  options: IChooseAcceleratorOptions
): Promise<IAcceleratorRequest | null> {
  const { manager, kernelId } = options;
  const body = new AcceleratorPicker({
    offers: manager.offersFor(kernelId),
    value: options.value,
    note: options.note,
    warning: options.warning,
    label: options.label
  });
  const dialog = new Dialog<IAcceleratorRequest | null>({
    title: 'Change Accelerator',
    body,
    // Start on the chosen offer, so arrow keys move the choice at once.
    focusNodeSelector: '.jp-FerryPicker-radio[tabindex="0"]',
    buttons: [
      Dialog.cancelButton(),
      Dialog.okButton({
        label: Private.acceptLabel(body, kernelId),
        caption: kernelId
          ? 'Restart the kernel on the chosen accelerator; its state is lost'
          : 'Start the kernel on the chosen accelerator'
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
      const text = Private.acceptLabel(body, kernelId);
      label.textContent = text;
      label.ariaLabel = text;
    }
  };
  const refresh = () => {
    body.offers = manager.offersFor(kernelId);
    relabel();
  };
  manager.changed.connect(refresh);
  body.valueChanged.connect(relabel);
  try {
    const launched = dialog.launch();
    relabel();
    const result = await launched;
    return result.button.accept ? result.value : null;
  } finally {
    manager.changed.disconnect(refresh);
    body.valueChanged.disconnect(relabel);
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
   * The kernel that would move, if any: offers are predicted for it (its own devices count as
   * free, its queue entry is not ahead of it) and its current choice is marked.
   */
  kernelId?: string;
}

/**
 * The module-private parts.
 */
namespace Private {
  /** What accepting the picker's choice does, in the words of its button. */
  export function acceptLabel(
    picker: AcceleratorPicker,
    kernelId: string | undefined
  ): string {
    const value = picker.value;
    if (!value) {
      return kernelId ? 'Restart' : 'Start';
    }
    const offer = picker.offers.find(candidate =>
      sameRequest(candidate.request, value)
    );
    if (offer?.current) {
      return 'Keep';
    }
    return `${kernelId ? 'Restart' : 'Start'} on ${formatAccelerator(value)}`;
  }
}
