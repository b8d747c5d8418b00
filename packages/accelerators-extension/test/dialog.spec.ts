import { waitForDialog } from '@jupyterlab/testing';
import { cluster, TestManager } from '@ferry/testing';
import { chooseAccelerator } from '@ferry/accelerators';

/** A key press where the focus is, as a keyboard sends it. */
function press(key: string): void {
  (document.activeElement ?? document.body).dispatchEvent(
    new KeyboardEvent('keydown', { key, bubbles: true, cancelable: true })
  );
}

function radios(): HTMLInputElement[] {
  return Array.from(
    document.querySelectorAll<HTMLInputElement>(
      '.jp-Dialog .jp-FerryPicker-radio'
    )
  );
}

/**
 * Resolves once `test` holds, looking again at each change of `node` (the dialog asks the gateway
 * again when the picture or the environment changes, then renders its answer).
 */
function until(node: Element, test: () => boolean): Promise<void> {
  return new Promise(resolve => {
    if (test()) {
      resolve();
      return;
    }
    const observer = new MutationObserver(() => {
      if (test()) {
        observer.disconnect();
        resolve();
      }
    });
    observer.observe(node, {
      attributes: true,
      characterData: true,
      childList: true,
      subtree: true
    });
  });
}

describe('the "Change Accelerator" dialog', () => {
  it('is used with the keyboard alone: arrows move the choice, Enter restarts on it', async () => {
    const manager = new TestManager(cluster());
    const chosen = chooseAccelerator({
      manager,
      // A kernel on the CPU: the model lists it nowhere.
      kernelId: 'cpu-kernel',
      value: { kind: 'cpu', count: 0 },
      warning:
        'Changing the accelerator restarts the kernel: its variables and everything else in its memory are lost.',
      label: 'Accelerator for train.ipynb'
    });
    await waitForDialog();
    const dialog = document.querySelector('.jp-Dialog')!;
    expect(dialog.querySelector('.jp-FerryPicker-warning')?.textContent).toBe(
      'Changing the accelerator restarts the kernel: its variables and everything else in its memory are lost.'
    );
    expect(
      dialog.querySelector('[role="radiogroup"]')?.getAttribute('aria-label')
    ).toBe('Accelerator for train.ipynb');
    // Every button has a name that says what it does (Dialog sets it on the button's label by ARIA
    // reflection, which browsers turn into the aria-label attribute); the kernel's own choice is
    // marked, and choosing it keeps the kernel.
    const buttonNames = () =>
      Array.from(dialog.querySelectorAll('button .jp-Dialog-buttonLabel')).map(
        label => label.ariaLabel
      );
    expect(buttonNames()).toEqual(['Cancel', 'Keep']);
    expect(radios()[0].getAttribute('aria-label')).toBe(
      'CPU: Current choice · This kernel runs on the CPU; choosing it keeps the kernel as it is'
    );
    // The focus starts on the current choice.
    expect(document.activeElement).toBe(radios()[0]);

    press('ArrowDown');
    expect(document.activeElement).toBe(radios()[1]);
    expect(radios()[1].checked).toBe(true);
    expect(buttonNames()).toEqual(['Cancel', 'Restart on GPU · H100 × 1']);
    press('ArrowDown');
    press('ArrowUp');
    expect(radios()[1].checked).toBe(true);

    // Someone takes a device while the dialog is open: the count follows (the gateway's answer,
    // asked again), the choice stays.
    manager.push(cluster({ h100Holders: [['other'], []] }));
    await until(document.querySelector('.jp-Dialog')!, () =>
      radios()[1].getAttribute('aria-label')!.includes('1 of 2 free')
    );
    expect(document.activeElement).toBe(radios()[1]);
    expect(document.activeElement?.getAttribute('aria-label')).toBe(
      'GPU · H100 × 1 (simulated): 1 of 2 free · starts now'
    );

    press('Enter');
    expect(await chosen).toEqual({
      request: { kind: 'gpu', model: 'H100', count: 1 },
      environment: null
    });
    expect(document.querySelector('.jp-Dialog')).toBeNull();
  });

  it('is left with Escape, changing nothing', async () => {
    const manager = new TestManager(cluster());
    const chosen = chooseAccelerator({
      manager,
      value: { kind: 'gpu', model: 'H100', count: 1 }
    });
    await waitForDialog();
    expect(document.activeElement).toBe(radios()[1]);
    press('End');
    expect(radios()[5].checked).toBe(true);
    press('Escape');
    expect(await chosen).toBeNull();
  });

  it('picks an environment and an accelerator, and names both on the restart button', async () => {
    const model = {
      ...cluster(),
      environments: [{ name: 'pytorch', displayName: 'PyTorch' }]
    };
    model.workers[0].environments = [
      { name: 'pytorch', displayName: 'PyTorch', available: true }
    ];
    const manager = new TestManager(model);
    const chosen = chooseAccelerator({
      manager,
      kernelId: 'cpu-kernel',
      value: { kind: 'cpu', count: 0 }
    });
    await waitForDialog();
    const dialog = document.querySelector('.jp-Dialog')!;
    const select = dialog.querySelector<HTMLSelectElement>(
      '.jp-FerryPicker-environmentSelect'
    )!;
    const accept = () =>
      dialog.querySelector('.jp-mod-accept .jp-Dialog-buttonLabel')
        ?.textContent;
    expect(accept()).toBe('Keep');
    select.value = 'pytorch';
    select.dispatchEvent(new Event('change', { bubbles: true }));
    // The same CPU in another environment restarts the kernel (once the gateway answered for it).
    await until(dialog, () => accept() !== 'Keep');
    expect(accept()).toBe('Restart on PyTorch · CPU');
    radios()[0].focus();
    press('ArrowDown');
    expect(accept()).toBe('Restart on PyTorch · GPU · H100 × 1');
    press('Enter');
    expect(await chosen).toEqual({
      request: { kind: 'gpu', model: 'H100', count: 1 },
      environment: 'pytorch'
    });
  });
});
