/**
 * What the gateway and the agent share, and nothing else: the Jupyter wire protocol, the gRPC link
 * between worker and gateway (types generated from `schema/worker.proto`), the device and worker
 * types both sides speak in, the queue where client messages wait for a kernel (one rule on both
 * sides), the one bounded log that late followers resume from (`FollowerLog`), kernel output
 * applied to a notebook cell (`OutputArea`, for rooms and jobs alike), the types of the REST
 * contract (generated from `schema/openapi.yaml`; the device types are its), and the loader of the
 * schemas in `schema/`.
 *
 * @packageDocumentation
 */

export type {
  DeviceKind,
  IDevice,
  IDeviceSample,
  IHostSample
} from './devices';
export {
  type Command__Output,
  deviceFromProto,
  deviceToProto,
  environmentFromProto,
  environmentTemplateFromProto,
  environmentTemplateToProto,
  environmentToProto,
  hostSampleFromProto,
  hostSampleToProto,
  type GatewayMessage,
  type GatewayMessage__Output,
  jobEventFromProto,
  jobEventToProto,
  jobReportFromProto,
  jobReportToProto,
  KERNEL_ID_METADATA,
  type KernelFrame,
  type KernelFrame__Output,
  kernelspecFromProto,
  kernelspecToProto,
  MAX_GRPC_MESSAGE_BYTES,
  runAsFromProto,
  runAsToProto,
  PROTO_LOADER_OPTIONS,
  type Register__Output,
  sampleFromProto,
  sampleToProto,
  TERMINAL_ID_METADATA,
  terminalStreamMetadata,
  type TerminalFrame,
  type TerminalFrame__Output,
  WORKER_ID_METADATA,
  workerAuthMetadata,
  type WorkerGatewayClient,
  type WorkerGatewayHandlers,
  type WorkerMessage,
  type WorkerMessage__Output,
  workerProtocol
} from './grpc';
export type {
  IJobError,
  IJobFinished,
  IJobReport,
  IJobRun,
  JobEvent,
  JobRunStatus
} from './jobs';
export { FollowerLog } from './follower-log';
export { type DeliverMessage, MessageQueue } from './message-queue';
export { nbformatOutput, type NbformatOutput } from './nbformat';
export {
  DisplayIds,
  type IOutputList,
  JsonOutputs,
  OutputArea,
  OutputBudget
} from './output-area';
export type { RestSchemas } from './rest';
export { ApiSchemas, eventSchemas, SCHEMA_DIR } from './schema';
export * from './wire';
export type {
  IAttributedSample,
  IEnvironmentInfo,
  IEnvironmentTemplate,
  IKernelLaunch,
  IKernelspecInfo,
  IRunAs,
  IRunningKernel,
  ITerminalOpen,
  IWorkerConnection,
  IWorkerEvents,
  KernelLifecycleEvent
} from './worker';
export { RUN_AS_IDS, WorkerFullError } from './worker';
