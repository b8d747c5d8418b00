// Original file: ../schema/worker.proto

export interface KernelFrame {
  channel?: string;
  parts?: (Buffer | Uint8Array | string)[];
}

export interface KernelFrame__Output {
  channel: string;
  parts: Buffer[];
}
