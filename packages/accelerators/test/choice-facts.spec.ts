/**
 * What the picker says of a choice besides its availability (#27): the device memory, the host's
 * cores and memory, and who holds its devices, named as the viewer may know them.
 */
import { cluster, device, kernels, withChoices, worker } from '@ferry/testing';
import { choiceFacts, type HolderNamer } from '../src/choice-facts';
import type { IAcceleratorOffer } from '../src/offers';

const GIB = 2 ** 30;

/** How a viewer who is no admin names holders: their own by notebook, anyone else's not at all. */
const viewer: HolderNamer = holder =>
  holder.kind === 'kernel' && holder.id === 'mine'
    ? 'you (train.ipynb)'
    : 'another user';

function offer(request: IAcceleratorOffer['request']): IAcceleratorOffer {
  return {
    request,
    label: '',
    total: 0,
    free: 0,
    maxPerWorker: 0,
    simulated: true,
    availability: 'free'
  };
}

/** Three hosts: a small one with two H100s, a large one with four, and one of CPUs only. */
function picture() {
  const h100 = (id: string, holders: string[] = []) =>
    device(id, 'gpu', 'H100', {
      memoryBytes: 80 * GIB,
      holders: kernels(holders)
    });
  return withChoices({
    time: '2026-01-01T00:00:10.000Z',
    workers: [
      worker('small', [h100('a0', ['mine']), h100('a1', ['theirs'])], {
        host: { time: '', cpuCount: 8, memoryTotalBytes: 64 * GIB }
      }),
      worker(
        'large',
        [
          h100('b0', ['theirs-too']),
          h100('b1', ['other']),
          h100('b2'),
          h100('b3')
        ],
        { host: { time: '', cpuCount: 32, memoryTotalBytes: 512 * GIB } }
      ),
      worker('cpu', [], {
        host: { time: '', cpuCount: 64, memoryTotalBytes: 256 * GIB }
      })
    ],
    queue: []
  });
}

describe('choiceFacts', () => {
  it("says each device's memory, times the count, and the host that can hold that many", () => {
    expect(
      choiceFacts(
        picture(),
        offer({ kind: 'gpu', model: 'H100', count: 4 }),
        viewer
      ).spec
    ).toBe('4 × 80.0 GiB GPU memory · host: 32 cores, 512.0 GiB memory');
    expect(
      choiceFacts(
        picture(),
        offer({ kind: 'gpu', model: 'H100', count: 1 }),
        viewer
      ).spec
    ).toBe('80.0 GiB GPU memory · host: 32 cores, 512.0 GiB memory');
    // The CPU choice: the largest host that takes CPU kernels.
    expect(
      choiceFacts(picture(), offer({ kind: 'cpu', count: 0 }), viewer).spec
    ).toBe('host: 64 cores, 256.0 GiB memory');
  });

  it('names the viewer\'s own holders, and everyone else\'s as "another user", once each', () => {
    expect(
      choiceFacts(
        picture(),
        offer({ kind: 'gpu', model: 'H100', count: 1 }),
        viewer
      ).heldBy
    ).toBe('In use by you (train.ipynb), another user (×3)');
    // Not known yet (the gateway has not answered): no holders rather than wrong ones.
    expect(
      choiceFacts(
        picture(),
        offer({ kind: 'gpu', model: 'H100', count: 1 }),
        null
      ).heldBy
    ).toBeUndefined();
  });

  it('says nothing it does not know: no model, an engine offer, a type no worker has', () => {
    const choice = offer({ kind: 'gpu', model: 'H100', count: 1 });
    expect(choiceFacts(null, choice, viewer)).toEqual({});
    expect(
      choiceFacts(
        picture(),
        offer({ kind: 'gpu', model: 'A100', count: 1, offer: 'a100' }),
        viewer
      )
    ).toEqual({});
    expect(
      choiceFacts(
        picture(),
        offer({ kind: 'tpu', model: 'v5e', count: 4 }),
        viewer
      )
    ).toEqual({});
    // Devices whose memory is not reported: the host alone.
    expect(
      choiceFacts(
        cluster(),
        offer({ kind: 'tpu', model: 'v5e', count: 4 }),
        viewer
      ).spec
    ).toBeUndefined();
  });
});
