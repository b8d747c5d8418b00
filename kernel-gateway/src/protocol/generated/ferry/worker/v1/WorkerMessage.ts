// Original file: ../schema/worker.proto

import type {
  Register as _ferry_worker_v1_Register,
  Register__Output as _ferry_worker_v1_Register__Output
} from '../../../ferry/worker/v1/Register';
import type {
  CommandResult as _ferry_worker_v1_CommandResult,
  CommandResult__Output as _ferry_worker_v1_CommandResult__Output
} from '../../../ferry/worker/v1/CommandResult';
import type {
  KernelLifecycle as _ferry_worker_v1_KernelLifecycle,
  KernelLifecycle__Output as _ferry_worker_v1_KernelLifecycle__Output
} from '../../../ferry/worker/v1/KernelLifecycle';
import type {
  DeviceSamples as _ferry_worker_v1_DeviceSamples,
  DeviceSamples__Output as _ferry_worker_v1_DeviceSamples__Output
} from '../../../ferry/worker/v1/DeviceSamples';

export interface WorkerMessage {
  register?: _ferry_worker_v1_Register | null;
  result?: _ferry_worker_v1_CommandResult | null;
  lifecycle?: _ferry_worker_v1_KernelLifecycle | null;
  samples?: _ferry_worker_v1_DeviceSamples | null;
  body?: 'register' | 'result' | 'lifecycle' | 'samples';
}

export interface WorkerMessage__Output {
  register?: _ferry_worker_v1_Register__Output | null;
  result?: _ferry_worker_v1_CommandResult__Output | null;
  lifecycle?: _ferry_worker_v1_KernelLifecycle__Output | null;
  samples?: _ferry_worker_v1_DeviceSamples__Output | null;
  body?: 'register' | 'result' | 'lifecycle' | 'samples';
}
