// Original file: ../schema/worker.proto

import type { Long } from '@grpc/proto-loader';

export interface CommandResult {
  request_id?: number | string | Long;
  error?: string;
  data?: Buffer | Uint8Array | string;
  _data?: 'data';
}

export interface CommandResult__Output {
  request_id: number;
  error: string;
  data?: Buffer;
  _data?: 'data';
}
