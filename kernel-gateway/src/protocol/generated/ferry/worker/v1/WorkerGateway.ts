// Original file: ../schema/worker.proto

import type * as grpc from '@grpc/grpc-js';
import type { MethodDefinition } from '@grpc/proto-loader';
import type {
  GatewayMessage as _ferry_worker_v1_GatewayMessage,
  GatewayMessage__Output as _ferry_worker_v1_GatewayMessage__Output
} from '../../../ferry/worker/v1/GatewayMessage';
import type {
  KernelFrame as _ferry_worker_v1_KernelFrame,
  KernelFrame__Output as _ferry_worker_v1_KernelFrame__Output
} from '../../../ferry/worker/v1/KernelFrame';
import type {
  WorkerMessage as _ferry_worker_v1_WorkerMessage,
  WorkerMessage__Output as _ferry_worker_v1_WorkerMessage__Output
} from '../../../ferry/worker/v1/WorkerMessage';

export interface WorkerGatewayClient extends grpc.Client {
  Connect(
    metadata: grpc.Metadata,
    options?: grpc.CallOptions
  ): grpc.ClientDuplexStream<
    _ferry_worker_v1_WorkerMessage,
    _ferry_worker_v1_GatewayMessage__Output
  >;
  Connect(
    options?: grpc.CallOptions
  ): grpc.ClientDuplexStream<
    _ferry_worker_v1_WorkerMessage,
    _ferry_worker_v1_GatewayMessage__Output
  >;
  connect(
    metadata: grpc.Metadata,
    options?: grpc.CallOptions
  ): grpc.ClientDuplexStream<
    _ferry_worker_v1_WorkerMessage,
    _ferry_worker_v1_GatewayMessage__Output
  >;
  connect(
    options?: grpc.CallOptions
  ): grpc.ClientDuplexStream<
    _ferry_worker_v1_WorkerMessage,
    _ferry_worker_v1_GatewayMessage__Output
  >;

  KernelChannel(
    metadata: grpc.Metadata,
    options?: grpc.CallOptions
  ): grpc.ClientDuplexStream<
    _ferry_worker_v1_KernelFrame,
    _ferry_worker_v1_KernelFrame__Output
  >;
  KernelChannel(
    options?: grpc.CallOptions
  ): grpc.ClientDuplexStream<
    _ferry_worker_v1_KernelFrame,
    _ferry_worker_v1_KernelFrame__Output
  >;
  kernelChannel(
    metadata: grpc.Metadata,
    options?: grpc.CallOptions
  ): grpc.ClientDuplexStream<
    _ferry_worker_v1_KernelFrame,
    _ferry_worker_v1_KernelFrame__Output
  >;
  kernelChannel(
    options?: grpc.CallOptions
  ): grpc.ClientDuplexStream<
    _ferry_worker_v1_KernelFrame,
    _ferry_worker_v1_KernelFrame__Output
  >;
}

export interface WorkerGatewayHandlers
  extends grpc.UntypedServiceImplementation {
  Connect: grpc.handleBidiStreamingCall<
    _ferry_worker_v1_WorkerMessage__Output,
    _ferry_worker_v1_GatewayMessage
  >;

  KernelChannel: grpc.handleBidiStreamingCall<
    _ferry_worker_v1_KernelFrame__Output,
    _ferry_worker_v1_KernelFrame
  >;
}

export interface WorkerGatewayDefinition extends grpc.ServiceDefinition {
  Connect: MethodDefinition<
    _ferry_worker_v1_WorkerMessage,
    _ferry_worker_v1_GatewayMessage,
    _ferry_worker_v1_WorkerMessage__Output,
    _ferry_worker_v1_GatewayMessage__Output
  >;
  KernelChannel: MethodDefinition<
    _ferry_worker_v1_KernelFrame,
    _ferry_worker_v1_KernelFrame,
    _ferry_worker_v1_KernelFrame__Output,
    _ferry_worker_v1_KernelFrame__Output
  >;
}
