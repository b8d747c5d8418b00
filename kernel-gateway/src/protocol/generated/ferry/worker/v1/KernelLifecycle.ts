// Original file: ../schema/worker.proto

export interface KernelLifecycle {
  kernel_id?: string;
  state?: string;
  reason?: string;
}

export interface KernelLifecycle__Output {
  kernel_id: string;
  state: string;
  reason: string;
}
