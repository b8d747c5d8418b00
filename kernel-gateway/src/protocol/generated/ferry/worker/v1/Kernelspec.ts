// Original file: ../schema/worker.proto

export interface Kernelspec {
  name?: string;
  argv?: string[];
  display_name?: string;
  language?: string;
  interrupt_mode?: string;
  env?: { [key: string]: string };
  metadata_json?: string;
  resources?: string[];
}

export interface Kernelspec__Output {
  name: string;
  argv: string[];
  display_name: string;
  language: string;
  interrupt_mode: string;
  env: { [key: string]: string };
  metadata_json: string;
  resources: string[];
}
