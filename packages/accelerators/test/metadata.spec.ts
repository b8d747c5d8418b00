import Ajv from 'ajv';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  kernelMatches,
  nearestOffer,
  readNotebookAccelerator,
  readNotebookEnvironment,
  toNotebookMetadata
} from '../src/metadata';
import { cluster, device, schedulerChoices, worker } from '@ferry/testing';

const schema = JSON.parse(
  readFileSync(
    join(__dirname, '../../../schema/notebook-accelerator.schema.json'),
    'utf8'
  )
);

describe('readNotebookAccelerator', () => {
  it("reads Ferry's own choice first", () => {
    expect(
      readNotebookAccelerator({
        ferry: { accelerator: { kind: 'tpu', model: 'v5e', count: 4 } },
        accelerator: 'GPU'
      })
    ).toEqual({
      request: { kind: 'tpu', model: 'v5e', count: 4 },
      source: 'ferry',
      original: 'TPU · v5e-4'
    });
  });

  it('ignores a malformed choice rather than guessing', () => {
    expect(
      readNotebookAccelerator({ ferry: { accelerator: { kind: 'fpga' } } })
    ).toBeNull();
    expect(
      readNotebookAccelerator({
        ferry: { accelerator: { kind: 'gpu', count: -1 } }
      })
    ).toBeNull();
    expect(readNotebookAccelerator({})).toBeNull();
  });

  it.each([
    ['GPU', 'T4', { kind: 'gpu', model: 'T4', count: 1 }],
    ['GPU', 'A100', { kind: 'gpu', model: 'A100', count: 1 }],
    ['GPU', 'L4', { kind: 'gpu', model: 'L4', count: 1 }],
    ['GPU', undefined, { kind: 'gpu', count: 1 }],
    ['TPU', 'V5E1', { kind: 'tpu', model: 'v5e', count: 1 }],
    ['TPU', 'V28', { kind: 'tpu', model: 'v2', count: 8 }],
    ['TPU', 'V6E1', { kind: 'tpu', model: 'v6e', count: 1 }]
  ])('reads Colab %s %s', (accelerator, gpuType, request) => {
    const metadata = gpuType
      ? { accelerator, colab: { gpuType, provenance: [] } }
      : { accelerator };
    expect(readNotebookAccelerator(metadata)).toEqual({
      request,
      source: 'colab',
      original: `Colab ${accelerator}${gpuType ? ` ${gpuType}` : ''}`
    });
  });

  it.each([
    ['none', { kind: 'cpu', count: 0 }],
    ['gpu', { kind: 'gpu', count: 1 }],
    ['nvidiaTeslaT4', { kind: 'gpu', model: 'T4', count: 2 }],
    ['nvidiaTeslaP100', { kind: 'gpu', model: 'P100', count: 1 }],
    ['tpu1vmV38', { kind: 'tpu', model: 'v3', count: 8 }],
    ['tpuV5e8', { kind: 'tpu', model: 'v5e', count: 8 }]
  ])('reads Kaggle %s', (accelerator, request) => {
    expect(
      readNotebookAccelerator({ kaggle: { accelerator, dataSources: [] } })
    ).toEqual({ request, source: 'kaggle', original: `Kaggle ${accelerator}` });
  });
});

describe('toNotebookMetadata', () => {
  const validate = new Ajv().compile(schema);

  it('writes what the notebook schema accepts and reads back the same', () => {
    for (const request of [
      { kind: 'cpu' as const },
      { kind: 'gpu' as const, model: 'H100', count: 1 },
      { kind: 'gpu' as const, model: 'A100', count: 1, profile: '1g.10gb' },
      { kind: 'tpu' as const, model: 'v5e', count: 4 },
      { kind: 'gpu' as const, model: 'A100', count: 4, offer: 'slurm-a100x4' }
    ]) {
      const metadata = { ferry: toNotebookMetadata(request) };
      expect(validate(metadata)).toBe(true);
      expect(readNotebookAccelerator(metadata)?.request).toEqual({
        count: request.kind === 'cpu' ? 0 : 1,
        ...request
      });
    }
  });

  it('the schema refuses what the gateway would refuse', () => {
    expect(validate({ ferry: { accelerator: { kind: 'fpga' } } })).toBe(false);
    expect(
      validate({ ferry: { accelerator: { kind: 'gpu', count: 1.5 } } })
    ).toBe(false);
  });
});

describe('nearestOffer', () => {
  const offers = schedulerChoices(cluster());

  it('takes the exact offer when the cluster has it', () => {
    const match = nearestOffer({ kind: 'tpu', model: 'v5e', count: 4 }, offers);
    expect(match).toMatchObject({ exact: true });
    expect(match?.offer.label).toBe('TPU · v5e-4');
    expect(match?.reason).toBeUndefined();
  });

  it('maps a Colab A100 notebook to the nearest GPU here, and says so', () => {
    const choice = readNotebookAccelerator({
      accelerator: 'GPU',
      colab: { gpuType: 'A100' }
    });
    const match = nearestOffer(choice!.request, offers);
    expect(match?.exact).toBe(false);
    expect(match?.offer.label).toBe('GPU · H100 × 1');
    expect(match?.reason).toBe(
      'GPU · A100 × 1 was asked for, but this cluster has no A100: nearest is GPU · H100 × 1'
    );
  });

  it('maps a Kaggle TPU v3-8 notebook to the largest v5e slice', () => {
    const choice = readNotebookAccelerator({
      kaggle: { accelerator: 'tpu1vmV38' }
    });
    const match = nearestOffer(choice!.request, offers);
    expect(match?.offer.label).toBe('TPU · v5e-4');
  });

  it('keeps the model and picks the nearest count when the count does not fit', () => {
    const match = nearestOffer(
      { kind: 'gpu', model: 'H100', count: 8 },
      offers
    );
    expect(match?.offer.label).toBe('GPU · H100 × 2');
    expect(match?.reason).toBe(
      'GPU · H100 × 8 was asked for, but one worker has at most 2 H100: nearest is GPU · H100 × 2'
    );
  });

  it('prefers the closest generation: an old T4 notebook gets an L4 before an H100', () => {
    const mixed = schedulerChoices({
      time: '2026-01-01T00:00:00.000Z',
      queue: [],
      workers: [
        worker('a', [device('g0', 'gpu', 'H100'), device('g1', 'gpu', 'L4')])
      ]
    });
    const choice = readNotebookAccelerator({
      kaggle: { accelerator: 'nvidiaTeslaT4' }
    });
    expect(nearestOffer(choice!.request, mixed)?.offer.label).toBe(
      'GPU · L4 × 1'
    );
  });

  it('falls back to CPU when the kind is missing, with the reason', () => {
    const gpuOnly = schedulerChoices({
      time: '2026-01-01T00:00:00.000Z',
      queue: [],
      workers: [worker('a', [device('g0', 'gpu', 'H100')])]
    });
    const match = nearestOffer(
      { kind: 'tpu', model: 'v5e', count: 1 },
      gpuOnly
    );
    expect(match?.offer.label).toBe('CPU');
    expect(match?.reason).toBe(
      'TPU · v5e-1 was asked for, but this cluster has no TPU: CPU instead'
    );
  });

  it('returns the exact offer even when busy or unavailable, with why it cannot start now', () => {
    const busy = schedulerChoices(cluster({ h100Holders: [['a'], ['b']] }));
    const match = nearestOffer({ kind: 'gpu', model: 'H100', count: 1 }, busy);
    expect(match?.exact).toBe(true);
    expect(match?.reason).toBe(
      'All 2 H100 are busy: you will be queued at position 1'
    );
    const down = schedulerChoices({
      time: '2026-01-01T00:00:00.000Z',
      queue: [],
      workers: [
        worker('a', [device('g0', 'gpu', 'H100')], { connected: false })
      ]
    });
    const unavailable = nearestOffer(
      { kind: 'gpu', model: 'H100', count: 1 },
      down
    );
    expect(unavailable?.offer.availability).toBe('unavailable');
    expect(unavailable?.reason).toBe('Every worker with H100 is disconnected');
  });
});

describe('kernelMatches', () => {
  const h100 = { kind: 'gpu' as const, model: 'H100', count: 1 };

  it('leaves a kernel alone when it holds or waits for what the notebook asks', () => {
    expect(kernelMatches({ ...h100, state: 'assigned' }, h100)).toBe(true);
    expect(kernelMatches({ ...h100, state: 'queued', position: 3 }, h100)).toBe(
      true
    );
    expect(
      kernelMatches({ ...h100, state: 'assigned' }, { kind: 'gpu', count: 1 })
    ).toBe(true);
    expect(kernelMatches(undefined, { kind: 'cpu' })).toBe(true);
  });

  it('asks for a restart when the kernel runs elsewhere', () => {
    expect(kernelMatches(undefined, h100)).toBe(false);
    expect(
      kernelMatches({ kind: 'cpu', count: 0, state: 'assigned' }, h100)
    ).toBe(false);
    expect(kernelMatches({ ...h100, count: 2, state: 'assigned' }, h100)).toBe(
      false
    );
    expect(
      kernelMatches(
        { kind: 'tpu', model: 'v5e', count: 4, state: 'assigned' },
        h100
      )
    ).toBe(false);
    expect(kernelMatches({ ...h100, state: 'ended' }, h100)).toBe(false);
  });

  it('matches engine offers by name', () => {
    const offer = { ...h100, offer: 'slurm-h100' };
    expect(
      kernelMatches(
        { ...h100, offer: 'slurm-h100', engine: 'slurm', state: 'starting' },
        offer
      )
    ).toBe(true);
    expect(kernelMatches({ ...h100, state: 'assigned' }, offer)).toBe(false);
    expect(
      kernelMatches(
        { ...h100, offer: 'slurm-h100', state: 'ended', job: '7' },
        offer
      )
    ).toBe(false);
  });
});

describe('readNotebookEnvironment', () => {
  const validate = new Ajv().compile(schema);

  it('keeps the environment beside the accelerator, as the schema says', () => {
    const metadata = {
      ferry: {
        ...toNotebookMetadata({ kind: 'gpu', model: 'H100', count: 1 }),
        environment: 'pytorch'
      }
    };
    expect(validate(metadata)).toBe(true);
    expect(readNotebookEnvironment(metadata)).toBe('pytorch');
    expect(readNotebookAccelerator(metadata)?.request).toEqual({
      kind: 'gpu',
      model: 'H100',
      count: 1
    });
    expect(
      readNotebookEnvironment({ ferry: { environment: 'kernelspec:ir' } })
    ).toBe('kernelspec:ir');
  });

  it('reads none from a notebook without one, or a malformed one', () => {
    expect(readNotebookEnvironment({})).toBeNull();
    // Colab and Kaggle name no environment that maps to one.
    expect(
      readNotebookEnvironment({
        accelerator: 'GPU',
        colab: { gpuType: 'T4' },
        kaggle: { accelerator: 'gpu', dockerImageVersionId: 30588 }
      })
    ).toBeNull();
    for (const bad of ['', ' torch', 'a b', 42]) {
      const metadata = { ferry: { environment: bad } };
      expect(readNotebookEnvironment(metadata)).toBeNull();
      expect(validate(metadata)).toBe(false);
    }
  });
});
