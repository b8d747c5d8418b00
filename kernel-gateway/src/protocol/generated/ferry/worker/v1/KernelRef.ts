// Original file: ../schema/worker.proto

export interface KernelRef {
  kernel_id?: string;
}

export interface KernelRef__Output {
  kernel_id: string;
}
