// Original file: ../schema/worker.proto

import type { Long } from '@grpc/proto-loader';

export interface DeviceSample {
  device_id?: string;
  time?: string;
  utilization_percent?: number | string;
  memory_used_bytes?: number | string | Long;
  memory_total_bytes?: number | string | Long;
  temperature_c?: number | string;
  power_w?: number | string;
  power_limit_w?: number | string;
  sm_clock_mhz?: number | string;
  memory_clock_mhz?: number | string;
  ecc_uncorrected?: number | string | Long;
  kernel_memory_bytes?: { [key: string]: number | string | Long };
  note?: string;
  _utilization_percent?: 'utilization_percent';
  _memory_used_bytes?: 'memory_used_bytes';
  _memory_total_bytes?: 'memory_total_bytes';
  _temperature_c?: 'temperature_c';
  _power_w?: 'power_w';
  _power_limit_w?: 'power_limit_w';
  _sm_clock_mhz?: 'sm_clock_mhz';
  _memory_clock_mhz?: 'memory_clock_mhz';
  _ecc_uncorrected?: 'ecc_uncorrected';
}

export interface DeviceSample__Output {
  device_id: string;
  time: string;
  utilization_percent?: number;
  memory_used_bytes?: number;
  memory_total_bytes?: number;
  temperature_c?: number;
  power_w?: number;
  power_limit_w?: number;
  sm_clock_mhz?: number;
  memory_clock_mhz?: number;
  ecc_uncorrected?: number;
  kernel_memory_bytes: { [key: string]: number };
  note: string;
  _utilization_percent?: 'utilization_percent';
  _memory_used_bytes?: 'memory_used_bytes';
  _memory_total_bytes?: 'memory_total_bytes';
  _temperature_c?: 'temperature_c';
  _power_w?: 'power_w';
  _power_limit_w?: 'power_limit_w';
  _sm_clock_mhz?: 'sm_clock_mhz';
  _memory_clock_mhz?: 'memory_clock_mhz';
  _ecc_uncorrected?: 'ecc_uncorrected';
}
