/**
 * Which accelerator device files each kernel and terminal may open: the files of every device a
 * worker hands out, and the cgroup v1 `devices` rules that deny a kernel those of the devices it
 * does not hold (`devices.deny c 195:1 rwm`); everything else stays allowed.
 */
import { statSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';

/** One device file as the devices cgroup names it: its type and numbers (and where it lies). */
export interface IDeviceFile {
  path: string;
  type: 'c' | 'b';
  major: number;
  minor: number;
}

/**
 * The type and numbers of a device file.
 *
 * @throws Error when the file is missing or is not a character or block device.
 */
export function deviceFile(file: string): IDeviceFile {
  const stat = statSync(file, { bigint: true });
  if (!stat.isCharacterDevice() && !stat.isBlockDevice()) {
    throw new Error(`${file} is not a device file`);
  }
  // glibc's major() and minor() of a 64-bit dev_t.
  const dev = stat.rdev;
  return {
    path: file,
    type: stat.isCharacterDevice() ? 'c' : 'b',
    major: Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & 0xfffff000n)),
    minor: Number((dev & 0xffn) | ((dev >> 12n) & 0xffffff00n))
  };
}

/** A file's line for `devices.allow` and `devices.deny`. */
function rule(file: IDeviceFile): string {
  return `${file.type} ${file.major}:${file.minor} rwm`;
}

/**
 * The device files of a worker's accelerators, by device id, read once at start: what a kernel
 * holding some of the devices must not open is the files of all the others.
 */
export class DeviceFiles {
  /**
   * @param files - Device files by device id, as the device sources found them (`/dev/nvidia1`; a
   *   simulated device's declared one). A device with none, or whose files cannot be read, is one
   *   no kernel can be kept from: it is listed in {@link unknown}.
   */
  constructor(files: Readonly<Record<string, readonly string[]>>) {
    for (const [id, paths] of Object.entries(files)) {
      if (paths.length === 0) {
        this.unknown.push(`${id} (no device file known)`);
        // A simulated device declares one with `:node=` in `--simulate`.
        continue;
      }
      try {
        this._byDevice.set(
          id,
          paths.map(p => deviceFile(p))
        );
      } catch (error) {
        this.unknown.push(`${id} (${(error as Error).message})`);
      }
    }
  }

  /** Devices whose files are unknown or unreadable, each with why: no kernel is kept from them. */
  readonly unknown: string[] = [];

  /** How many devices have known files. */
  get size(): number {
    return this._byDevice.size;
  }

  /**
   * The files a kernel or terminal holding `held` must not open: those of every other device, less
   * any it shares with a held one (a MIG instance's parent GPU, which its siblings hold too).
   */
  deniedFor(held: readonly string[]): IDeviceFile[] {
    const allowed = new Set(
      held.flatMap(id => this._byDevice.get(id) ?? []).map(rule)
    );
    const denied = new Map<string, IDeviceFile>();
    for (const [id, files] of this._byDevice) {
      if (held.includes(id)) {
        continue;
      }
      for (const file of files) {
        if (!allowed.has(rule(file))) {
          denied.set(rule(file), file);
        }
      }
    }
    return [...denied.values()];
  }

  private readonly _byDevice = new Map<string, IDeviceFile[]>();
}

/**
 * One enclosure's `devices` cgroup (v1): it denies the files it is told to, and can be told again
 * (a kernel whose devices are put aside, or that resumes on others).
 */
export class DeviceRules {
  constructor(
    private readonly _dir: string,
    private readonly _files: DeviceFiles
  ) {}

  /** Deny the files of every device but `held`, and allow again those denied before that `held` has. */
  hold(held: readonly string[]): void {
    const denied = new Set(this._files.deniedFor(held).map(rule));
    for (const line of this._denied) {
      if (!denied.has(line)) {
        writeFileSync(path.join(this._dir, 'devices.allow'), line);
        this._denied.delete(line);
      }
    }
    for (const line of denied) {
      if (!this._denied.has(line)) {
        writeFileSync(path.join(this._dir, 'devices.deny'), line);
        this._denied.add(line);
      }
    }
  }

  /** The rules denied now (`c 195:1 rwm`). */
  private readonly _denied = new Set<string>();
}
