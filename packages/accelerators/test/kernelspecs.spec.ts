import type { KernelSpec } from '@jupyterlab/services';
import {
  acceleratorKernelspecName,
  kernelspecAccelerator
} from '../src/kernelspecs';

/** A kernelspec as a server lists it, with this metadata. */
function spec(
  name: string,
  metadata: KernelSpec.ISpecModel['metadata'] = {}
): KernelSpec.ISpecModel {
  return {
    name,
    display_name: name,
    language: 'python',
    argv: [],
    resources: {},
    metadata
  };
}

const specs: KernelSpec.ISpecModels = {
  default: 'python3',
  kernelspecs: {
    python3: spec('python3', { debugger: true }),
    'python3.gpu-h100-x1': spec('python3.gpu-h100-x1', {
      debugger: true,
      ferry: {
        base: 'python3',
        accelerator: { kind: 'gpu', model: 'H100', count: 1 },
        simulated: true
      }
    }),
    'python3.offer-a100': spec('python3.offer-a100', {
      ferry: {
        base: 'python3',
        accelerator: { kind: 'gpu', model: 'A100', count: 1, offer: 'a100' },
        simulated: false
      }
    }),
    'julia.gpu-h100-x1': spec('julia.gpu-h100-x1', {
      ferry: {
        base: 'julia',
        accelerator: { kind: 'gpu', model: 'H100', count: 1 },
        simulated: true
      }
    })
  }
};

describe('accelerator kernelspecs', () => {
  it('reads what an accelerator kernelspec runs on, and nothing from any other', () => {
    expect(
      kernelspecAccelerator(specs.kernelspecs['python3.gpu-h100-x1'])
    ).toEqual({
      base: 'python3',
      accelerator: { kind: 'gpu', model: 'H100', count: 1 },
      simulated: true
    });
    expect(kernelspecAccelerator(specs.kernelspecs.python3)).toBeNull();
    expect(kernelspecAccelerator(undefined)).toBeNull();
    for (const ferry of [
      'gpu',
      [],
      { base: 3, accelerator: { kind: 'gpu' } },
      { base: 'python3' },
      { base: 'python3', accelerator: { kind: 'quantum' } }
    ]) {
      expect(kernelspecAccelerator(spec('x', { ferry }))).toBeNull();
    }
  });

  it("finds a kernelspec's accelerator kernelspec for a choice, if the server lists one", () => {
    const h100 = { kind: 'gpu' as const, model: 'H100', count: 1 };
    expect(acceleratorKernelspecName(specs, 'python3', h100)).toBe(
      'python3.gpu-h100-x1'
    );
    expect(acceleratorKernelspecName(specs, 'julia', h100)).toBe(
      'julia.gpu-h100-x1'
    );
    expect(
      acceleratorKernelspecName(specs, 'python3', { ...h100, count: 2 })
    ).toBeNull();
    expect(
      acceleratorKernelspecName(specs, 'python3', {
        kind: 'gpu',
        model: 'A100',
        count: 1,
        offer: 'a100'
      })
    ).toBe('python3.offer-a100');
    // The offer's devices are not the offer.
    expect(
      acceleratorKernelspecName(specs, 'python3', {
        kind: 'gpu',
        model: 'A100',
        count: 1
      })
    ).toBeNull();
    expect(acceleratorKernelspecName(null, 'python3', h100)).toBeNull();
  });
});
