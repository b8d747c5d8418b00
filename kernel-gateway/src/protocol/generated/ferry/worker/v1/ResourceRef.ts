// Original file: ../schema/worker.proto

export interface ResourceRef {
  kernelspec?: string;
  file?: string;
}

export interface ResourceRef__Output {
  kernelspec: string;
  file: string;
}
