import {
  BadAcceleratorRequestError,
  deviceType,
  formatAcceleratorSpec,
  parseAcceleratorSpec,
  parseOfferSpec,
  sameRequest,
  type IAcceleratorRequest
} from '../src';

describe('the environment form', () => {
  it.each([
    ['cpu', { kind: 'cpu', count: 0 }],
    ['gpu:2', { kind: 'gpu', count: 2 }],
    ['gpu:H100:1', { kind: 'gpu', model: 'H100', count: 1 }],
    ['tpu:v5e:4', { kind: 'tpu', model: 'v5e', count: 4 }],
    ['gpu:4090:1', { kind: 'gpu', model: '4090', count: 1 }],
    ['gpu::1:1g.10gb', { kind: 'gpu', count: 1, profile: '1g.10gb' }],
    [
      'gpu:A100:2:1g.10gb',
      { kind: 'gpu', model: 'A100', count: 2, profile: '1g.10gb' }
    ]
  ] as const)('reads %s and writes it back as it was', (text, request) => {
    expect(parseAcceleratorSpec(text)).toEqual(request);
    expect(formatAcceleratorSpec(request)).toBe(text);
  });

  it('spells out the count, so a numeric model is read back as a model', () => {
    const text = formatAcceleratorSpec({ kind: 'gpu', model: '4090' });
    expect(text).toBe('gpu:4090:1');
    expect(parseAcceleratorSpec(text)).toEqual({
      kind: 'gpu',
      model: '4090',
      count: 1
    });
  });

  it('reads and writes an offer of the profiles file by name', () => {
    expect(parseOfferSpec('offer:slurm-a100')).toBe('slurm-a100');
    expect(parseOfferSpec(' OFFER: slurm-a100 ')).toBe('slurm-a100');
    expect(parseOfferSpec('gpu:H100:1')).toBeUndefined();
    expect(() => parseOfferSpec('offer:')).toThrow(
      "'offer:' names no offer (write offer:NAME)"
    );
    const request: IAcceleratorRequest = {
      kind: 'gpu',
      model: 'A100',
      count: 4,
      offer: 'slurm-a100'
    };
    expect(parseOfferSpec(formatAcceleratorSpec(request))).toBe('slurm-a100');
  });

  it('says what to write instead of a malformed request', () => {
    expect(() => parseAcceleratorSpec('npu:1')).toThrow(
      BadAcceleratorRequestError
    );
    expect(() => parseAcceleratorSpec('gpu:H100:0')).toThrow(
      /count must be a whole number of at least 1/
    );
    expect(() => parseAcceleratorSpec('tpu:v5e:1:1g.10gb')).toThrow(
      /MIG profiles exist only for GPUs/
    );
  });
});

describe('sameRequest', () => {
  const h100: IAcceleratorRequest = { kind: 'gpu', model: 'H100', count: 1 };

  it('matches models and profiles in any case, as the scheduler places them', () => {
    // The browser's copy compared them as written, the gateway's in any case.
    expect(sameRequest(h100, { kind: 'gpu', model: 'h100', count: 1 })).toBe(
      true
    );
    expect(
      sameRequest(
        { kind: 'gpu', model: 'A100', count: 1, profile: '1G.10GB' },
        { kind: 'gpu', model: 'a100', count: 1, profile: '1g.10gb' }
      )
    ).toBe(true);
  });

  it('tells apart requests with different memory bounds', () => {
    // The browser's copy ignored memoryGiB; the scheduler places such requests differently.
    expect(sameRequest(h100, { ...h100, memoryGiB: 80 })).toBe(false);
    expect(
      sameRequest({ ...h100, memoryGiB: 40 }, { ...h100, memoryGiB: 80 })
    ).toBe(false);
    expect(
      sameRequest({ ...h100, memoryGiB: 80 }, { ...h100, memoryGiB: 80 })
    ).toBe(true);
    expect(sameRequest(h100, deviceType({ ...h100, memoryGiB: 80 }))).toBe(
      true
    );
  });

  it('reads an absent count as 1 and compares offers by name', () => {
    // The gateway's copy took normalised requests only and knew no offers.
    expect(sameRequest({ kind: 'gpu', model: 'H100' }, h100)).toBe(true);
    expect(sameRequest(h100, { ...h100, count: 2 })).toBe(false);
    expect(sameRequest({ kind: 'cpu' }, { kind: 'cpu', count: 0 })).toBe(true);
    expect(sameRequest(h100, { kind: 'tpu', model: 'H100', count: 1 })).toBe(
      false
    );
    expect(sameRequest(h100, { kind: 'gpu', count: 1 })).toBe(false);
    expect(
      sameRequest({ ...h100, offer: 'a100' }, { ...h100, offer: 'a100' })
    ).toBe(true);
    expect(sameRequest({ ...h100, offer: 'a100' }, h100)).toBe(false);
    expect(
      sameRequest({ ...h100, offer: 'a100' }, { ...h100, offer: 'A100' })
    ).toBe(false);
  });
});
