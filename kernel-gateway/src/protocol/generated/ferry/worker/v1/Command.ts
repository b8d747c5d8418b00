// Original file: ../schema/worker.proto

import type {
  StartKernel as _ferry_worker_v1_StartKernel,
  StartKernel__Output as _ferry_worker_v1_StartKernel__Output
} from '../../../ferry/worker/v1/StartKernel';
import type {
  KernelRef as _ferry_worker_v1_KernelRef,
  KernelRef__Output as _ferry_worker_v1_KernelRef__Output
} from '../../../ferry/worker/v1/KernelRef';
import type {
  ResourceRef as _ferry_worker_v1_ResourceRef,
  ResourceRef__Output as _ferry_worker_v1_ResourceRef__Output
} from '../../../ferry/worker/v1/ResourceRef';
import type { Long } from '@grpc/proto-loader';

export interface Command {
  request_id?: number | string | Long;
  start_kernel?: _ferry_worker_v1_StartKernel | null;
  interrupt_kernel?: _ferry_worker_v1_KernelRef | null;
  restart_kernel?: _ferry_worker_v1_KernelRef | null;
  shutdown_kernel?: _ferry_worker_v1_KernelRef | null;
  read_resource?: _ferry_worker_v1_ResourceRef | null;
  body?:
    | 'start_kernel'
    | 'interrupt_kernel'
    | 'restart_kernel'
    | 'shutdown_kernel'
    | 'read_resource';
}

export interface Command__Output {
  request_id: number;
  start_kernel?: _ferry_worker_v1_StartKernel__Output | null;
  interrupt_kernel?: _ferry_worker_v1_KernelRef__Output | null;
  restart_kernel?: _ferry_worker_v1_KernelRef__Output | null;
  shutdown_kernel?: _ferry_worker_v1_KernelRef__Output | null;
  read_resource?: _ferry_worker_v1_ResourceRef__Output | null;
  body?:
    | 'start_kernel'
    | 'interrupt_kernel'
    | 'restart_kernel'
    | 'shutdown_kernel'
    | 'read_resource';
}
