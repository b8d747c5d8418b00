// Original file: ../schema/worker.proto

import type {
  Kernelspec as _ferry_worker_v1_Kernelspec,
  Kernelspec__Output as _ferry_worker_v1_Kernelspec__Output
} from '../../../ferry/worker/v1/Kernelspec';
import type {
  Device as _ferry_worker_v1_Device,
  Device__Output as _ferry_worker_v1_Device__Output
} from '../../../ferry/worker/v1/Device';
import type {
  RunningKernel as _ferry_worker_v1_RunningKernel,
  RunningKernel__Output as _ferry_worker_v1_RunningKernel__Output
} from '../../../ferry/worker/v1/RunningKernel';

export interface Register {
  worker_id?: string;
  name?: string;
  version?: string;
  kernelspecs?: _ferry_worker_v1_Kernelspec[];
  devices?: _ferry_worker_v1_Device[];
  kernels?: _ferry_worker_v1_RunningKernel[];
  accepts_cpu?: boolean;
}

export interface Register__Output {
  worker_id: string;
  name: string;
  version: string;
  kernelspecs: _ferry_worker_v1_Kernelspec__Output[];
  devices: _ferry_worker_v1_Device__Output[];
  kernels: _ferry_worker_v1_RunningKernel__Output[];
  accepts_cpu: boolean;
}
