/**
 * The device files through which each discovered accelerator is reached, as far as the host tells:
 * what a kernel that does not hold a device is denied (see `ProcessLimits`). Files every device of
 * a vendor shares (`/dev/nvidiactl`, `/dev/nvidia-uvm`, `/dev/kfd`, `/dev/vfio/vfio`) are no
 * device's and stay open to all.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { IDevice } from '../../protocol/devices';

/**
 * A GPU's UUID and device minor number from the driver's
 * `/proc/driver/nvidia/gpus/<PCI address>/information` (its `GPU UUID:` and `Device Minor:` lines;
 * the minor can differ from nvidia-smi's index), or `undefined` when either is missing.
 */
export function parseNvidiaInformation(
  text: string
): { uuid: string; minor: number } | undefined {
  const uuid = /^GPU UUID:\s*(GPU-\S+)/m.exec(text)?.[1];
  const minor = /^Device Minor:\s*(\d+)/m.exec(text)?.[1];
  return uuid && minor ? { uuid, minor: Number(minor) } : undefined;
}

/**
 * The device file of each NVIDIA device: `/dev/nvidia<minor>` of its GPU, and of the parent GPU for
 * a MIG instance (all instances of a GPU share it: one instance is not kept from another, which
 * would take `/dev/nvidia-caps`). A GPU whose minor the driver does not tell gets none.
 *
 * @param driverRoot - the driver's GPU folders (`/proc/driver/nvidia/gpus`)
 */
export async function nvidiaDeviceFiles(
  devices: readonly IDevice[],
  driverRoot: string,
  devRoot = '/dev'
): Promise<Record<string, string[]>> {
  const minors = new Map<string, number>();
  for (const entry of await fs.readdir(driverRoot).catch(() => [])) {
    const text = await fs
      .readFile(path.join(driverRoot, entry, 'information'), 'utf8')
      .catch(() => '');
    const gpu = parseNvidiaInformation(text);
    if (gpu) {
      minors.set(gpu.uuid, gpu.minor);
    }
  }
  const files: Record<string, string[]> = {};
  for (const device of devices) {
    const minor = minors.get(device.parentId ?? device.id);
    if (minor !== undefined) {
      files[device.id] = [path.join(devRoot, `nvidia${minor}`)];
    }
  }
  return files;
}

/**
 * The DRM files of each AMD GPU (`/dev/dri/card<n>` and its `/dev/dri/renderD<m>`), from
 * `/sys/class/drm/card<n>/device/drm`, rocm-smi's card `n` being DRM's card `n`. ROCm reaches a GPU
 * through its render node; `/dev/kfd` serves them all.
 */
export async function rocmDeviceFiles(
  devices: readonly IDevice[],
  sysRoot = '/sys/class/drm',
  devRoot = '/dev/dri'
): Promise<Record<string, string[]>> {
  const files: Record<string, string[]> = {};
  for (const device of devices) {
    const names = await fs
      .readdir(path.join(sysRoot, `card${device.visibleId}`, 'device', 'drm'))
      .catch(() => []);
    const nodes = names.filter(name => /^(card|renderD)\d+$/.test(name));
    if (nodes.length > 0) {
      files[device.id] = nodes.map(name => path.join(devRoot, name));
    }
  }
  return files;
}

/**
 * The files of each TPU chip: its `accel` nodes (TPU v2 to v4, `/dev/accel<n>`), else, bound to
 * `vfio-pci` (v5e, v5p, v6e), its IOMMU group's `/dev/vfio/<group>` (which every device of the group
 * shares). Chips are found by their PCI address (the `pci` label).
 */
export async function tpuDeviceFiles(
  devices: readonly IDevice[],
  pciRoot = '/sys/bus/pci/devices',
  devRoot = '/dev'
): Promise<Record<string, string[]>> {
  const files: Record<string, string[]> = {};
  for (const device of devices) {
    const pci = device.labels.pci;
    if (!pci || pci.includes('/')) {
      continue;
    }
    const dir = path.join(pciRoot, pci);
    const accel = (await fs.readdir(path.join(dir, 'accel')).catch(() => []))
      .filter(name => /^accel\d+$/.test(name))
      .map(name => path.join(devRoot, name));
    if (accel.length > 0) {
      files[device.id] = accel;
      continue;
    }
    const driver = await fs.readlink(path.join(dir, 'driver')).catch(() => '');
    const group = await fs
      .readlink(path.join(dir, 'iommu_group'))
      .catch(() => '');
    if (
      path.basename(driver) === 'vfio-pci' &&
      /^\d+$/.test(path.basename(group))
    ) {
      files[device.id] = [path.join(devRoot, 'vfio', path.basename(group))];
    }
  }
  return files;
}
