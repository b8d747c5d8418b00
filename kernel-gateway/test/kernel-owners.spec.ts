/**
 * A kernel stays its owner's across a gateway restart: the restarted gateway adopts the kernels its
 * workers still run, and each comes back with the owner the store recorded (before, an adopted
 * kernel fell to the token's owner, and its user lost it from their list).
 */
import { AdoptionRig } from './workers';

describe('kernel owners across a gateway restart', () => {
  const rig = AdoptionRig.use('kernel-owners');

  it("adopts a remote kernel as its owner's, and forgets the owner of a kernel shut down", async () => {
    let gw = await rig.start('owners-host', [
      '--simulate',
      'gpu:H100:2',
      '--no-cpu'
    ]);
    const alices = await gw.gateway.registry.start({
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 },
      owner: 'oidc:alice'
    });
    const owners = await gw.gateway.registry.start({
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    await Promise.all([alices.ready, owners.ready]);
    expect(alices.owner).toBe('oidc:alice');

    const restarted = await rig.restart();
    gw = restarted.gw;
    await restarted.adopted;
    const adopted = gw.gateway.registry.get(alices.id);
    expect(adopted?.owner).toBe('oidc:alice');
    expect(gw.gateway.registry.get(owners.id)?.owner).toBeUndefined();

    // Shut down, its record goes: a kernel of that id adopted later would not be alice's.
    await gw.gateway.registry.shutdown(alices.id);
    const store = gw.gateway.state.table<string>('kernel-owners', 'msgpack', {
      cache: true
    });
    expect(store.get(alices.id)).toBeUndefined();
    await gw.gateway.registry.shutdown(owners.id);
  }, 90000);
});
