// Original file: ../schema/worker.proto

export interface StartKernel {
  kernel_id?: string;
  kernel_name?: string;
  env?: { [key: string]: string };
  cwd?: string;
  device_ids?: string[];
}

export interface StartKernel__Output {
  kernel_id: string;
  kernel_name: string;
  env: { [key: string]: string };
  cwd: string;
  device_ids: string[];
}
