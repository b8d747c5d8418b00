// Original file: ../schema/worker.proto

import type { Long } from '@grpc/proto-loader';

export interface Device {
  id?: string;
  kind?: string;
  vendor?: string;
  model?: string;
  name?: string;
  visible_id?: string;
  memory_bytes?: number | string | Long;
  profile?: string;
  parent_id?: string;
  labels?: { [key: string]: string };
  simulated?: boolean;
  _memory_bytes?: 'memory_bytes';
  _profile?: 'profile';
  _parent_id?: 'parent_id';
}

export interface Device__Output {
  id: string;
  kind: string;
  vendor: string;
  model: string;
  name: string;
  visible_id: string;
  memory_bytes?: number;
  profile?: string;
  parent_id?: string;
  labels: { [key: string]: string };
  simulated: boolean;
  _memory_bytes?: 'memory_bytes';
  _profile?: 'profile';
  _parent_id?: 'parent_id';
}
