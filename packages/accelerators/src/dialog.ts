/**
 * The "Change Accelerator" dialog: the picker with live free counts, in JupyterLab's dialog.
 */

import { Dialog, showDialog } from '@jupyterlab/apputils';
import type { IAcceleratorRequest } from './models';
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
  const { manager } = options;
  const body = new AcceleratorPicker({
    offers: manager.offers,
    value: options.value,
    note: options.note,
    warning: options.warning,
    label: options.label
  });
  const refresh = () => {
    body.offers = manager.offers;
  };
  manager.changed.connect(refresh);
  try {
    const result = await showDialog<IAcceleratorRequest | null>({
      title: 'Change Accelerator',
      body,
      // Start on the chosen offer, so arrow keys move the choice at once.
      focusNodeSelector: '.jp-FerryPicker-radio[tabindex="0"]',
      buttons: [
        Dialog.cancelButton(),
        Dialog.okButton({
          label: 'Restart on It',
          caption:
            'Restart the kernel on the chosen accelerator; its state is lost',
          ariaLabel:
            'Restart the kernel on the chosen accelerator; its state is lost'
        })
      ]
    });
    return result.button.accept ? result.value : null;
  } finally {
    manager.changed.disconnect(refresh);
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
}
