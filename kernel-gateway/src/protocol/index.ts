/**
 * What the gateway and the agent share, and nothing else: the Jupyter wire protocol, the gRPC link
 * between worker and gateway (types generated from `schema/worker.proto`), the device and worker
 * types both sides speak in, the queue where client messages wait for a kernel (one rule on both
 * sides), the types of the REST contract (generated from `schema/openapi.yaml`; the device types
 * are its), and the loader of the schemas in `schema/`.
 *
 * @packageDocumentation
 */
export * from './devices';
export * from './grpc';
export * from './message-queue';
export * from './rest';
export * from './schema';
export * from './wire';
export * from './worker';
