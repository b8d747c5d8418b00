/**
 * @jest-environment jsdom
 */
import type { ITranslator } from '@jupyterlab/translation';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import { AcceleratorPicker } from '../src/picker';
import { cluster, device, schedulerChoices, worker } from '@ferry/testing';

function rows(picker: AcceleratorPicker): HTMLElement[] {
  return Array.from(picker.node.querySelectorAll('.jp-FerryPicker-item'));
}

function radios(picker: AcceleratorPicker): HTMLInputElement[] {
  return Array.from(picker.node.querySelectorAll('input[type="radio"]'));
}

function press(picker: AcceleratorPicker, key: string): void {
  const target = document.activeElement ?? picker.node;
  target.dispatchEvent(new KeyboardEvent('keydown', { key, bubbles: true }));
}

describe('AcceleratorPicker', () => {
  let picker: AcceleratorPicker;

  afterEach(() => {
    picker.dispose();
  });

  it('lists every offer with its free count, in words', () => {
    picker = new AcceleratorPicker({ offers: schedulerChoices(cluster()) });
    expect(rows(picker).map(row => row.textContent)).toEqual([
      'CPUstarts now',
      'GPU · H100 × 1 (simulated)2 of 2 free · starts now',
      'GPU · H100 × 2 (simulated)2 of 2 free · starts now',
      'TPU · v5e-1 (simulated)4 of 4 free · starts now',
      'TPU · v5e-2 (simulated)4 of 4 free · starts now',
      'TPU · v5e-4 (simulated)4 of 4 free · starts now'
    ]);
  });

  it('says when all devices are busy and where the user would wait', () => {
    const model = cluster({
      h100Holders: [['a'], ['b']],
      queue: [
        {
          holder: { kind: 'kernel', id: 'c' },
          kind: 'gpu',
          model: 'H100',
          count: 1,
          position: 1,
          since: '2026-01-01T00:00:00.000Z'
        }
      ]
    });
    picker = new AcceleratorPicker({ offers: schedulerChoices(model) });
    const h100 = rows(picker)[1];
    expect(h100.querySelector('.jp-FerryPicker-detail')?.textContent).toBe(
      '0 of 2 free · All 2 H100 are busy: you will be queued at position 2'
    );
    expect(h100.classList).toContain('jp-mod-busy');
    // Busy offers can still be chosen: the kernel waits in the queue.
    expect(radios(picker)[1].disabled).toBe(false);
  });

  it('disables unavailable offers and says why', () => {
    const offers = schedulerChoices({
      time: '2026-01-01T00:00:00.000Z',
      queue: [],
      workers: [
        worker('a', [device('g', 'gpu', 'A100')], { connected: false }),
        worker('b', [device('t', 'tpu', 'v5e')])
      ]
    });
    picker = new AcceleratorPicker({ offers });
    const a100 = radios(picker)[1];
    expect(a100.disabled).toBe(true);
    expect(a100.getAttribute('aria-label')).toBe(
      'GPU · A100 × 1 (simulated): Unavailable: Every worker with A100 is disconnected'
    );
    expect(rows(picker)[1].classList).toContain('jp-mod-unavailable');
  });

  it('gives every control an accessible name that carries its state', () => {
    picker = new AcceleratorPicker({
      offers: schedulerChoices(cluster({ h100Holders: [['a'], []] })),
      label: 'Accelerator for Untitled.ipynb'
    });
    const group = picker.node.querySelector('[role="radiogroup"]');
    expect(group?.getAttribute('aria-label')).toBe(
      'Accelerator for Untitled.ipynb'
    );
    for (const radio of radios(picker)) {
      expect(radio.getAttribute('aria-label')).toBeTruthy();
    }
    expect(radios(picker)[1].getAttribute('aria-label')).toBe(
      'GPU · H100 × 1 (simulated): 1 of 2 free · starts now'
    );
    expect(radios(picker)[2].getAttribute('aria-label')).toBe(
      'GPU · H100 × 2 (simulated): 1 of 2 free · Only 1 H100 free on one worker: you will be queued at position 1'
    );
  });

  it('starts on the current choice and moves with the arrow keys, skipping unavailable offers', () => {
    const offers = schedulerChoices({
      time: '2026-01-01T00:00:00.000Z',
      queue: [],
      workers: [
        worker('a', [device('g', 'gpu', 'A100')], { connected: false }),
        worker('b', [device('t0', 'tpu', 'v5e'), device('t1', 'tpu', 'v5e')])
      ]
    });
    picker = new AcceleratorPicker({
      offers,
      value: { kind: 'cpu', count: 0 }
    });
    Widget.attach(picker, document.body);
    const changes: unknown[] = [];
    picker.valueChanged.connect((_, value) => changes.push(value));
    MessageLoop.sendMessage(picker, Widget.Msg.ActivateRequest);
    expect(document.activeElement).toBe(radios(picker)[0]);
    expect(radios(picker).map(radio => radio.tabIndex)).toEqual([
      0, -1, -1, -1
    ]);

    press(picker, 'ArrowDown');
    expect(picker.getValue()).toEqual({ kind: 'tpu', model: 'v5e', count: 1 });
    expect(document.activeElement).toBe(radios(picker)[2]);
    expect(rows(picker)[2].classList).toContain('jp-mod-selected');

    press(picker, 'End');
    expect(picker.getValue()).toEqual({ kind: 'tpu', model: 'v5e', count: 2 });
    press(picker, 'ArrowDown');
    expect(picker.getValue()).toEqual({ kind: 'cpu', count: 0 });
    press(picker, 'ArrowUp');
    expect(picker.getValue()).toEqual({ kind: 'tpu', model: 'v5e', count: 2 });
    expect(changes).toHaveLength(4);
    Widget.detach(picker);
  });

  it('keeps the choice and focus when free counts refresh live', () => {
    const model = cluster();
    picker = new AcceleratorPicker({
      offers: schedulerChoices(model),
      value: { kind: 'gpu', model: 'H100', count: 1 }
    });
    Widget.attach(picker, document.body);
    MessageLoop.sendMessage(picker, Widget.Msg.ActivateRequest);
    picker.offers = schedulerChoices(cluster({ h100Holders: [['x'], ['y']] }));
    expect(radios(picker)[1].checked).toBe(true);
    expect(document.activeElement).toBe(radios(picker)[1]);
    expect(
      rows(picker)[1].querySelector('.jp-FerryPicker-detail')?.textContent
    ).toBe(
      '0 of 2 free · All 2 H100 are busy: you will be queued at position 1'
    );
    expect(picker.selectedOffer?.availability).toBe('queued');
    Widget.detach(picker);
  });

  it('shows how a Colab or Kaggle choice was translated', () => {
    picker = new AcceleratorPicker({
      offers: schedulerChoices(cluster()),
      note: 'GPU · A100 × 1 was asked for, but this cluster has no A100: nearest is GPU · H100 × 1'
    });
    expect(picker.node.querySelector('[role="note"]')?.textContent).toContain(
      'nearest is GPU · H100 × 1'
    );
  });

  it('warns that choosing restarts the kernel, and ties the warning to the list for screen readers', () => {
    picker = new AcceleratorPicker({
      offers: schedulerChoices(cluster()),
      note: 'This notebook asks for Colab GPU T4.',
      warning:
        'Changing the accelerator restarts the kernel: its variables and everything else in its memory are lost.'
    });
    const group = picker.node.querySelector('[role="radiogroup"]')!;
    const described = group
      .getAttribute('aria-describedby')!
      .split(' ')
      .map(id => picker.node.querySelector(`#${id}`)?.textContent);
    expect(described).toEqual([
      'This notebook asks for Colab GPU T4.',
      'Changing the accelerator restarts the kernel: its variables and everything else in its memory are lost.'
    ]);
  });

  it('selects with a click (change event)', () => {
    picker = new AcceleratorPicker({ offers: schedulerChoices(cluster()) });
    Widget.attach(picker, document.body);
    expect(picker.getValue()).toBeNull();
    radios(picker)[5].click();
    expect(picker.getValue()).toEqual({ kind: 'tpu', model: 'v5e', count: 4 });
    Widget.detach(picker);
  });

  it('offers environment × accelerator where environments are declared, and none otherwise', () => {
    const model = {
      ...cluster(),
      environments: [{ name: 'pytorch', displayName: 'PyTorch' }]
    };
    model.workers[0].environments = [
      { name: 'pytorch', displayName: 'PyTorch', available: true }
    ];
    picker = new AcceleratorPicker({
      offers: schedulerChoices(model),
      value: { kind: 'gpu', model: 'H100', count: 1 },
      environments: [
        { name: 'pytorch', displayName: 'PyTorch' },
        {
          name: 'jax',
          displayName: 'JAX',
          unavailable: 'on no connected worker'
        }
      ]
    });
    const select = picker.node.querySelector<HTMLSelectElement>(
      '.jp-FerryPicker-environmentSelect'
    )!;
    expect(Array.from(select.options).map(o => o.textContent)).toEqual([
      'None (the default Python)',
      'PyTorch',
      'JAX (unavailable: on no connected worker)'
    ]);
    expect(select.value).toBe('');
    const changed: (string | null)[] = [];
    picker.environmentChanged.connect((_, name) => {
      changed.push(name);
      picker.offers = schedulerChoices(
        model,
        name ? { environment: name } : {}
      );
    });
    select.value = 'pytorch';
    select.dispatchEvent(new Event('change', { bubbles: true }));
    expect(changed).toEqual(['pytorch']);
    expect(picker.environment).toBe('pytorch');
    // Each choice names the environment; the choice made stays.
    expect(
      radios(picker).map(radio => radio.getAttribute('aria-label'))
    ).toContain(
      'PyTorch · GPU · H100 × 1 (simulated): 2 of 2 free · starts now'
    );
    expect(picker.value).toEqual({ kind: 'gpu', model: 'H100', count: 1 });

    // Without environments there is no menu, and the labels are the accelerators alone.
    picker.dispose();
    picker = new AcceleratorPicker({ offers: schedulerChoices(model) });
    expect(picker.node.querySelector('select')).toBeNull();
    expect(rows(picker)[1].textContent).toBe(
      'GPU · H100 × 1 (simulated)2 of 2 free · starts now'
    );
  });

  it("shows the gateway's wait estimate beside a queued choice, and none where it has none", () => {
    const model = cluster({ h100Holders: [['a'], ['b']] });
    const offers = schedulerChoices(model);
    const h100 = offers.findIndex(
      offer => offer.request.model === 'H100' && offer.request.count === 1
    );
    expect(offers[h100].availability).toBe('queued');
    picker = new AcceleratorPicker({ offers });
    expect(
      rows(picker)[h100].querySelector('.jp-FerryPicker-estimate')
    ).toBeNull();
    picker.offers = offers.map((offer, index) =>
      index === h100
        ? {
            ...offer,
            wait: {
              estimateSeconds: 250,
              basis: 'holds of H100 lasted 4 min',
              holders: []
            }
          }
        : offer
    );
    const estimate = rows(picker)[h100].querySelector(
      '.jp-FerryPicker-estimate'
    );
    expect(estimate?.textContent).toBe('about 4 min');
    expect(estimate?.getAttribute('title')).toBe('holds of H100 lasted 4 min');
    expect(radios(picker)[h100].getAttribute('aria-label')).toMatch(
      / · about 4 min$/
    );
  });

  it("says its words through JupyterLab's translator", () => {
    const asked: string[] = [];
    const translator = {
      languageCode: 'xx',
      load: () => ({
        __: (text: string, ...args: unknown[]) => {
          asked.push(text);
          return `«${args.reduce<string>((out, arg, i) => out.replace(`%${i + 1}`, String(arg)), text)}»`;
        },
        _n: (one: string, many: string, n: number) =>
          `«${(n === 1 ? one : many).replace('%1', String(n))}»`
      })
    } as unknown as ITranslator;
    picker = new AcceleratorPicker({
      offers: schedulerChoices(cluster()),
      translator
    });
    expect(asked).toContain('starts now');
    expect(radios(picker)[0].getAttribute('aria-label')).toContain(
      '«starts now»'
    );
    expect(
      picker.node
        .querySelector('[role="radiogroup"]')
        ?.getAttribute('aria-label')
    ).toBe('«Accelerator»');
  });
});
