import type { KernelSpec } from '@jupyterlab/services';
import type { IAcceleratorRequest, IKernelspecAccelerator } from './models';
import { deviceType, sameRequest } from './labels';

/**
 * What an accelerator kernelspec runs on (its `metadata.ferry`), or `null` for any other kernelspec.
 *
 * @param spec - A kernelspec as the server lists it.
 *
 * #### Notes
 * Ferry lists every kernelspec once more per accelerator choice (`python3.gpu-h100-x1`, "Python 3 ·
 * GPU · H100 × 1"), for clients that can only pick a kernelspec. A kernel started from one runs on
 * what its name says.
 */
export function kernelspecAccelerator(
  spec: KernelSpec.ISpecModel | null | undefined
): IKernelspecAccelerator | null {
  const ferry = spec?.metadata?.['ferry'];
  if (!Private.isObject(ferry)) {
    return null;
  }
  const { base, accelerator, simulated } = ferry;
  if (
    typeof base !== 'string' ||
    !Private.isObject(accelerator) ||
    !['cpu', 'gpu', 'tpu'].includes(accelerator.kind as string)
  ) {
    return null;
  }
  return {
    base,
    accelerator: { ...accelerator } as unknown as IAcceleratorRequest,
    simulated: simulated === true
  };
}

/**
 * The name of `base`'s accelerator kernelspec for `request` (`python3.gpu-h100-x1`), or `null` when
 * the server lists none for it.
 *
 * @param specs - The kernelspecs the server lists.
 * @param base - A kernelspec's name (`python3`).
 * @param request - The accelerator choice.
 */
export function acceleratorKernelspecName(
  specs: KernelSpec.ISpecModels | null | undefined,
  base: string,
  request: IAcceleratorRequest
): string | null {
  for (const [name, spec] of Object.entries(specs?.kernelspecs ?? {})) {
    const own = kernelspecAccelerator(spec);
    if (
      own?.base === base &&
      sameRequest(deviceType(own.accelerator), deviceType(request))
    ) {
      return name;
    }
  }
  return null;
}

/**
 * The module-private parts.
 */
namespace Private {
  export function isObject(
    value: unknown
  ): value is { readonly [key: string]: unknown } {
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  }
}
