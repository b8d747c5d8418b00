// Original file: ../schema/worker.proto

import type {
  Registered as _ferry_worker_v1_Registered,
  Registered__Output as _ferry_worker_v1_Registered__Output
} from '../../../ferry/worker/v1/Registered';
import type {
  Command as _ferry_worker_v1_Command,
  Command__Output as _ferry_worker_v1_Command__Output
} from '../../../ferry/worker/v1/Command';

export interface GatewayMessage {
  registered?: _ferry_worker_v1_Registered | null;
  command?: _ferry_worker_v1_Command | null;
  body?: 'registered' | 'command';
}

export interface GatewayMessage__Output {
  registered?: _ferry_worker_v1_Registered__Output | null;
  command?: _ferry_worker_v1_Command__Output | null;
  body?: 'registered' | 'command';
}
