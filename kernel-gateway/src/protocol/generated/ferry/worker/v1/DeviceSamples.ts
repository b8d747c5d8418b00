// Original file: ../schema/worker.proto

import type {
  DeviceSample as _ferry_worker_v1_DeviceSample,
  DeviceSample__Output as _ferry_worker_v1_DeviceSample__Output
} from '../../../ferry/worker/v1/DeviceSample';

export interface DeviceSamples {
  samples?: _ferry_worker_v1_DeviceSample[];
}

export interface DeviceSamples__Output {
  samples: _ferry_worker_v1_DeviceSample__Output[];
}
