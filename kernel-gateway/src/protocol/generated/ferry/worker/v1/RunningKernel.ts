// Original file: ../schema/worker.proto

export interface RunningKernel {
  kernel_id?: string;
  kernel_name?: string;
  device_ids?: string[];
  execution_state?: string;
}

export interface RunningKernel__Output {
  kernel_id: string;
  kernel_name: string;
  device_ids: string[];
  execution_state: string;
}
