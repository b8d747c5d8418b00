/**
 * @jest-environment jsdom
 */
import { Widget } from '@lumino/widgets';
import { AcceleratorStatusItem } from '../src/statusitem';
import { cluster, TestManager } from '@ferry/testing';

describe('AcceleratorStatusItem in an environment', () => {
  it("puts the kernel's environment first, by its display name, and only where it has one", () => {
    const manager = new TestManager();
    const item = new AcceleratorStatusItem({ manager, showFree: false });
    Widget.attach(item, document.body);
    manager.push({
      ...cluster({ h100Holders: [['in-torch'], ['plain']] }),
      environments: [{ name: 'pytorch', displayName: 'PyTorch 2.4' }],
      kernelEnvironments: { 'in-torch': 'pytorch' }
    });
    item.kernelId = 'in-torch';
    expect(item.text).toBe('PyTorch 2.4 · GPU · H100 × 1 (simulated)');
    expect(item.node.getAttribute('aria-label')).toContain(
      'Accelerator: PyTorch 2.4 · GPU · H100 × 1 (simulated).'
    );
    item.kernelId = 'plain';
    expect(item.text).toBe('GPU · H100 × 1 (simulated)');
    item.dispose();
  });
});
