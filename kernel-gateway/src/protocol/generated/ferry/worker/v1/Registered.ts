// Original file: ../schema/worker.proto

export interface Registered {
  unknown_kernel_ids?: string[];
}

export interface Registered__Output {
  unknown_kernel_ids: string[];
}
