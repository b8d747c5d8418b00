import type { IDeviceSource } from './source';
import type {
  DeviceKind,
  IDevice,
  IDeviceSample
} from '../../protocol/devices';

/**
 * The devices a cluster engine allocated to this process's job, as it exports them: Slurm's GRES sets
 * `CUDA_VISIBLE_DEVICES` (GPUs) and a TPU plugin `TPU_VISIBLE_CHIPS`. A worker inside a job offers
 * exactly these. Ids are `alloc-<kind>-<visible id>`; nothing about them is measured.
 */
export class AllocatedDeviceSource implements IDeviceSource {
  constructor(options: AllocatedDeviceSource.IOptions) {
    this._options = options;
  }

  readonly name = 'allocated';

  async discover(): Promise<IDevice[]> {
    const { kind, env = process.env } = this._options;
    const variable =
      kind === 'tpu' ? 'TPU_VISIBLE_CHIPS' : 'CUDA_VISIBLE_DEVICES';
    const ids = (env[variable] ?? '')
      .split(',')
      .map(id => id.trim())
      .filter(id => id !== '' && id !== 'NoDevFiles');
    const model = this._options.model ?? (kind === 'tpu' ? 'TPU' : 'GPU');
    return ids.map(visibleId => ({
      id: `alloc-${kind}-${visibleId}`,
      kind,
      vendor: kind === 'tpu' ? 'google' : 'nvidia',
      model,
      name: `${model} (allocated by the cluster engine)`,
      visibleId,
      labels: { allocation: variable },
      simulated: false
    }));
  }

  async sample(devices: readonly IDevice[]): Promise<IDeviceSample[]> {
    const time = new Date().toISOString();
    return devices.map(device => ({
      deviceId: device.id,
      time,
      note: 'allocated by the cluster engine; not measured'
    }));
  }

  private _options: AllocatedDeviceSource.IOptions;
}

export namespace AllocatedDeviceSource {
  export interface IOptions {
    kind: DeviceKind;
    /** The model the offer promises (default `GPU` or `TPU`). */
    model?: string;
    /** Where to read the allocation (default: this process's environment). */
    env?: NodeJS.ProcessEnv;
  }
}
