import {
  formatAccelerator,
  formatEngineOffer
} from '@ferry/accelerator-vocabulary';
import {
  choiceCounts,
  parseAcceleratorSpec,
  parseOfferSpec,
  sameRequest,
  type IAcceleratorRequest,
  type Scheduler
} from '../scheduler';
import { KERNEL_NAME } from '../agent/kernels/kernelspecs';
import { offerEngine, type IAcceleratorOffer } from '../engines';
import { type IKernelspecInfo, type RestSchemas } from '../protocol';

/** The `ferry` field of an accelerator kernelspec's metadata (`spec.metadata.ferry`; schema `KernelspecAccelerator`). */
export type IKernelspecAcceleratorMetadata =
  RestSchemas['KernelspecAccelerator'];

/** A kernelspec listed for one accelerator choice: a real kernelspec, run on that choice. */
export interface IAcceleratorKernelspec extends IKernelspecInfo {
  /** The name of the real kernelspec the worker launches. */
  base: string;
  /** What a start by this name asks for. */
  target: AcceleratorKernelspecs.Target;
}

/**
 * Parse `--kernelspec-accelerators`: `auto`, `none`, or a comma-separated list of choices in the
 * `KERNEL_ACCELERATOR` form (`gpu:H100:1,gpu:H100:2,tpu:v5e:4,offer:a100`).
 *
 * @throws Error saying what is wrong and what to write instead.
 */
export function parseKernelspecAccelerators(
  text: string
): AcceleratorKernelspecs.Setting {
  const value = text.trim();
  if (value === '') {
    throw new Error(`the list of accelerator kernelspecs is empty: ${USAGE}`);
  }
  if (/^(auto|none)$/i.test(value)) {
    return value.toLowerCase() as 'auto' | 'none';
  }
  const targets: AcceleratorKernelspecs.Target[] = [];
  for (const item of value.split(',').map(part => part.trim())) {
    if (item === '') {
      throw new Error(`'${value}' has an empty choice between commas`);
    }
    if (/^(auto|none)$/i.test(item)) {
      throw new Error(
        `'${item}' stands alone, not in a list: ${USAGE} (got '${value}')`
      );
    }
    const offer = parseOfferSpec(item);
    if (offer !== undefined) {
      targets.push({ offer });
      continue;
    }
    let accelerator: IAcceleratorRequest;
    try {
      accelerator = parseAcceleratorSpec(item);
    } catch (error) {
      throw new Error(`${(error as Error).message} (${USAGE})`);
    }
    if (accelerator.kind === 'cpu') {
      throw new Error(
        `'${item}': every kernelspec already runs on the CPU; list devices (gpu:H100:1) or offers (offer:NAME)`
      );
    }
    targets.push({ accelerator });
  }
  return targets.filter(
    (target, index) =>
      targets.findIndex(other => sameAcceleratorTarget(other, target)) === index
  );
}

/** Whether two choices are the same: the same offer, or requests for the same devices. */
export function sameAcceleratorTarget(
  a: AcceleratorKernelspecs.Target,
  b: AcceleratorKernelspecs.Target
): boolean {
  if (a.offer !== undefined || b.offer !== undefined) {
    return a.offer === b.offer;
  }
  return sameRequest(a.accelerator, b.accelerator);
}

/** How `--kernelspec-accelerators` is written, for error messages. */
const USAGE =
  'write auto, none, or a list such as gpu:H100:1,gpu:H100:2,tpu:v5e:4,offer:a100';

/**
 * The accelerator choices listed as kernelspecs of their own, for clients that can only pick a
 * kernelspec (a stock JupyterLab, `jupyter server --gateway-url`): `python3` on one H100 is
 * `python3.gpu-h100-x1`, "Python 3 · GPU · H100 × 1". The list follows the devices the scheduler can
 * place kernels on, so a worker joining or leaving changes it; busy devices stay listed (a start
 * then waits in the queue).
 *
 * #### Notes
 * Names are `<kernelspec>.<choice>`: `gpu-h100-x1`, `gpu-a100-mig-1g.10gb-x1`, `gpu-x2` (any model),
 * `tpu-v5e-x4`, `offer-a100`; lower case, in jupyter_client's alphabet (`[a-z0-9._-]`). A start by
 * such a name is resolved by looking the name up in the current list, never by parsing it back. A
 * real kernelspec of the same name wins.
 */
export class AcceleratorKernelspecs {
  constructor(options: AcceleratorKernelspecs.IOptions) {
    this._setting = options.setting;
    this._scheduler = options.scheduler;
    this._offers = options.offers;
    if (Array.isArray(this._setting)) {
      const names = this._offers.map(offer => offer.name);
      for (const target of this._setting) {
        if (target.offer !== undefined && !names.includes(target.offer)) {
          throw new Error(
            `--kernelspec-accelerators lists offer:${target.offer}, but the profiles have no offer of that name; offers: ${names.join(', ') || 'none (start the gateway with --profiles)'}`
          );
        }
      }
    }
  }

  /** The choices now: each device type at each count one worker holds and each offer (`auto`), or the listed ones. */
  choices(): AcceleratorKernelspecs.IChoice[] {
    if (this._setting === 'none') {
      return [];
    }
    const types = this._scheduler.deviceTypes().sort(Private.compareTypes);
    const targets: AcceleratorKernelspecs.Target[] =
      this._setting === 'auto'
        ? [
            // Each count one worker can hold (1, 2, 4 ... up to its most), as the picker offers.
            ...types.flatMap(type =>
              choiceCounts(Math.max(1, type.mostOnOneWorker)).map(count => ({
                accelerator: {
                  kind: type.kind,
                  model: type.model,
                  count,
                  ...(type.profile !== undefined
                    ? { profile: type.profile }
                    : {})
                }
              }))
            ),
            ...this._offers.map(offer => ({ offer: offer.name }))
          ]
        : this._setting;
    const choices: AcceleratorKernelspecs.IChoice[] = [];
    for (const target of targets) {
      const choice =
        target.offer !== undefined
          ? this._offerChoice(target.offer)
          : this._deviceChoice(target.accelerator, types);
      if (choice) {
        choices.push(choice);
      }
    }
    return choices;
  }

  /**
   * The accelerator kernelspecs of these kernelspecs, for the choices now.
   *
   * @param specs - The real kernelspecs; a derived name one of them has is left out.
   */
  derive(specs: IKernelspecInfo[]): IAcceleratorKernelspec[] {
    const choices = this.choices();
    const taken = new Set(specs.map(spec => spec.name));
    const derived: IAcceleratorKernelspec[] = [];
    for (const spec of specs) {
      for (const choice of choices) {
        const name = `${spec.name}.${choice.suffix}`;
        if (taken.has(name) || !KERNEL_NAME.test(name)) {
          continue;
        }
        taken.add(name);
        const ferry: IKernelspecAcceleratorMetadata = {
          base: spec.name,
          accelerator: { ...choice.accelerator },
          simulated: choice.simulated
        };
        derived.push({
          name,
          spec: {
            ...spec.spec,
            display_name: `${spec.spec.display_name} · ${choice.label}`,
            metadata: { ...spec.spec.metadata, ferry }
          },
          resources: spec.resources,
          base: spec.name,
          target: choice.target
        });
      }
    }
    return derived;
  }

  /**
   * The name of `base`'s kernelspec for `target` in the list now, or undefined when none is listed.
   *
   * @param base - A real kernelspec's name.
   * @param target - A normalized request, or an offer by name.
   */
  nameFor(
    base: string,
    target: AcceleratorKernelspecs.Target
  ): string | undefined {
    const choice = this.choices().find(c =>
      sameAcceleratorTarget(c.target, target)
    );
    return choice ? `${base}.${choice.suffix}` : undefined;
  }

  private _deviceChoice(
    request: IAcceleratorRequest,
    types: Scheduler.IDeviceType[]
  ): AcceleratorKernelspecs.IChoice | undefined {
    try {
      this._scheduler.check(request);
    } catch {
      // No worker could ever hold it now: not listed until one can.
      return undefined;
    }
    const matching = types.filter(
      type =>
        type.kind === request.kind &&
        (request.model === undefined ||
          type.model.toLowerCase() === request.model.toLowerCase()) &&
        (type.profile ?? '').toLowerCase() ===
          (request.profile ?? '').toLowerCase()
    );
    // Spelt as the devices are (`H100`, whatever case the list used).
    const model =
      request.model === undefined
        ? undefined
        : (matching[0]?.model ?? request.model);
    const accelerator: IAcceleratorRequest = {
      kind: request.kind,
      ...(model !== undefined ? { model } : {}),
      count: request.count,
      ...(request.profile !== undefined ? { profile: request.profile } : {})
    };
    const simulated =
      matching.length > 0 && matching.every(type => type.simulated);
    const suffix = [
      accelerator.kind,
      ...(model !== undefined ? [Private.slug(model)] : []),
      ...(accelerator.profile !== undefined
        ? ['mig', Private.slug(accelerator.profile)]
        : []),
      `x${accelerator.count}`
    ].join('-');
    return {
      suffix,
      label: formatAccelerator(accelerator, { simulated }),
      target: { accelerator },
      accelerator,
      simulated
    };
  }

  private _offerChoice(
    name: string
  ): AcceleratorKernelspecs.IChoice | undefined {
    const offer = this._offers.find(o => o.name === name);
    if (!offer) {
      return undefined;
    }
    return {
      suffix: `offer-${Private.slug(offer.name)}`,
      label: formatEngineOffer({
        displayName: offer.displayName ?? offer.name,
        engine: offerEngine(offer)
      }),
      target: { offer: offer.name },
      accelerator: { ...offer.accelerator, offer: offer.name },
      simulated: false
    };
  }

  private _setting: AcceleratorKernelspecs.Setting;
  private _scheduler: Scheduler;
  private _offers: IAcceleratorOffer[];
}

export namespace AcceleratorKernelspecs {
  /** One accelerator choice, as a kernel start asks for it: devices, or an offer by name. */
  export type Target =
    | { accelerator: IAcceleratorRequest; offer?: undefined }
    | { offer: string; accelerator?: undefined };

  /**
   * Which choices are listed: none, `auto` (each device type at 1, 2, 4 ... up to the most one
   * worker has, and each offer), or these
   * (each listed while some worker could hold it).
   */
  export type Setting = 'none' | 'auto' | Target[];

  /** A choice as the list shows it. */
  export interface IChoice {
    /** What follows the kernelspec's name and a dot (`gpu-h100-x1`). */
    suffix: string;
    /** What follows its display name and ` · ` (`GPU · H100 × 1 (simulated)`). */
    label: string;
    target: Target;
    /** The metadata's `accelerator`. */
    accelerator: IKernelspecAcceleratorMetadata['accelerator'];
    simulated: boolean;
  }

  export interface IOptions {
    setting: Setting;
    /** What the devices of the workers are, and which requests could ever be placed. */
    scheduler: Scheduler;
    /** The offers of the profiles file that this gateway can start workers for. */
    offers: IAcceleratorOffer[];
  }
}

/** The module-private parts. */
namespace Private {
  /** Lower case, with runs of anything outside `[a-z0-9.]` as one `-`. */
  export function slug(text: string): string {
    return (
      text
        .toLowerCase()
        .replace(/[^a-z0-9.]+/g, '-')
        .replace(/^-+|-+$/g, '') || 'x'
    );
  }

  /** GPUs before TPUs, whole devices before MIG instances, then by model and profile. */
  export function compareTypes(
    a: Scheduler.IDeviceType,
    b: Scheduler.IDeviceType
  ): number {
    if (a.kind !== b.kind) {
      return a.kind === 'gpu' ? -1 : 1;
    }
    if ((a.profile === undefined) !== (b.profile === undefined)) {
      return a.profile === undefined ? -1 : 1;
    }
    return (
      a.model.localeCompare(b.model) ||
      (a.profile ?? '').localeCompare(b.profile ?? '')
    );
  }
}
