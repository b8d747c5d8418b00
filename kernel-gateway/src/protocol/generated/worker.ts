import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type {
  Command as _ferry_worker_v1_Command,
  Command__Output as _ferry_worker_v1_Command__Output
} from './ferry/worker/v1/Command';
import type {
  CommandResult as _ferry_worker_v1_CommandResult,
  CommandResult__Output as _ferry_worker_v1_CommandResult__Output
} from './ferry/worker/v1/CommandResult';
import type {
  Device as _ferry_worker_v1_Device,
  Device__Output as _ferry_worker_v1_Device__Output
} from './ferry/worker/v1/Device';
import type {
  DeviceSample as _ferry_worker_v1_DeviceSample,
  DeviceSample__Output as _ferry_worker_v1_DeviceSample__Output
} from './ferry/worker/v1/DeviceSample';
import type {
  DeviceSamples as _ferry_worker_v1_DeviceSamples,
  DeviceSamples__Output as _ferry_worker_v1_DeviceSamples__Output
} from './ferry/worker/v1/DeviceSamples';
import type {
  GatewayMessage as _ferry_worker_v1_GatewayMessage,
  GatewayMessage__Output as _ferry_worker_v1_GatewayMessage__Output
} from './ferry/worker/v1/GatewayMessage';
import type {
  KernelFrame as _ferry_worker_v1_KernelFrame,
  KernelFrame__Output as _ferry_worker_v1_KernelFrame__Output
} from './ferry/worker/v1/KernelFrame';
import type {
  KernelLifecycle as _ferry_worker_v1_KernelLifecycle,
  KernelLifecycle__Output as _ferry_worker_v1_KernelLifecycle__Output
} from './ferry/worker/v1/KernelLifecycle';
import type {
  KernelRef as _ferry_worker_v1_KernelRef,
  KernelRef__Output as _ferry_worker_v1_KernelRef__Output
} from './ferry/worker/v1/KernelRef';
import type {
  Kernelspec as _ferry_worker_v1_Kernelspec,
  Kernelspec__Output as _ferry_worker_v1_Kernelspec__Output
} from './ferry/worker/v1/Kernelspec';
import type {
  Register as _ferry_worker_v1_Register,
  Register__Output as _ferry_worker_v1_Register__Output
} from './ferry/worker/v1/Register';
import type {
  Registered as _ferry_worker_v1_Registered,
  Registered__Output as _ferry_worker_v1_Registered__Output
} from './ferry/worker/v1/Registered';
import type {
  ResourceRef as _ferry_worker_v1_ResourceRef,
  ResourceRef__Output as _ferry_worker_v1_ResourceRef__Output
} from './ferry/worker/v1/ResourceRef';
import type {
  RunningKernel as _ferry_worker_v1_RunningKernel,
  RunningKernel__Output as _ferry_worker_v1_RunningKernel__Output
} from './ferry/worker/v1/RunningKernel';
import type {
  StartKernel as _ferry_worker_v1_StartKernel,
  StartKernel__Output as _ferry_worker_v1_StartKernel__Output
} from './ferry/worker/v1/StartKernel';
import type {
  WorkerGatewayClient as _ferry_worker_v1_WorkerGatewayClient,
  WorkerGatewayDefinition as _ferry_worker_v1_WorkerGatewayDefinition
} from './ferry/worker/v1/WorkerGateway';
import type {
  WorkerMessage as _ferry_worker_v1_WorkerMessage,
  WorkerMessage__Output as _ferry_worker_v1_WorkerMessage__Output
} from './ferry/worker/v1/WorkerMessage';

type SubtypeConstructor<
  Constructor extends new (...args: any) => any,
  Subtype
> = {
  new (...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  ferry: {
    worker: {
      v1: {
        Command: MessageTypeDefinition<
          _ferry_worker_v1_Command,
          _ferry_worker_v1_Command__Output
        >;
        CommandResult: MessageTypeDefinition<
          _ferry_worker_v1_CommandResult,
          _ferry_worker_v1_CommandResult__Output
        >;
        Device: MessageTypeDefinition<
          _ferry_worker_v1_Device,
          _ferry_worker_v1_Device__Output
        >;
        DeviceSample: MessageTypeDefinition<
          _ferry_worker_v1_DeviceSample,
          _ferry_worker_v1_DeviceSample__Output
        >;
        DeviceSamples: MessageTypeDefinition<
          _ferry_worker_v1_DeviceSamples,
          _ferry_worker_v1_DeviceSamples__Output
        >;
        GatewayMessage: MessageTypeDefinition<
          _ferry_worker_v1_GatewayMessage,
          _ferry_worker_v1_GatewayMessage__Output
        >;
        KernelFrame: MessageTypeDefinition<
          _ferry_worker_v1_KernelFrame,
          _ferry_worker_v1_KernelFrame__Output
        >;
        KernelLifecycle: MessageTypeDefinition<
          _ferry_worker_v1_KernelLifecycle,
          _ferry_worker_v1_KernelLifecycle__Output
        >;
        KernelRef: MessageTypeDefinition<
          _ferry_worker_v1_KernelRef,
          _ferry_worker_v1_KernelRef__Output
        >;
        Kernelspec: MessageTypeDefinition<
          _ferry_worker_v1_Kernelspec,
          _ferry_worker_v1_Kernelspec__Output
        >;
        Register: MessageTypeDefinition<
          _ferry_worker_v1_Register,
          _ferry_worker_v1_Register__Output
        >;
        Registered: MessageTypeDefinition<
          _ferry_worker_v1_Registered,
          _ferry_worker_v1_Registered__Output
        >;
        ResourceRef: MessageTypeDefinition<
          _ferry_worker_v1_ResourceRef,
          _ferry_worker_v1_ResourceRef__Output
        >;
        RunningKernel: MessageTypeDefinition<
          _ferry_worker_v1_RunningKernel,
          _ferry_worker_v1_RunningKernel__Output
        >;
        StartKernel: MessageTypeDefinition<
          _ferry_worker_v1_StartKernel,
          _ferry_worker_v1_StartKernel__Output
        >;
        WorkerGateway: SubtypeConstructor<
          typeof grpc.Client,
          _ferry_worker_v1_WorkerGatewayClient
        > & { service: _ferry_worker_v1_WorkerGatewayDefinition };
        WorkerMessage: MessageTypeDefinition<
          _ferry_worker_v1_WorkerMessage,
          _ferry_worker_v1_WorkerMessage__Output
        >;
      };
    };
  };
}
