import type { Logger } from 'pino';
import type { IGatewayOptions } from '../config';
import type { KernelRegistry, SessionStore } from '../kernels';
import type { ApiSchemas } from '../protocol/schema';

/** What every router of the gateway works with. */
export interface IGatewayContext {
  options: IGatewayOptions;
  registry: KernelRegistry;
  sessions: SessionStore;
  schemas: ApiSchemas;
  logger: Logger;
  startedAt: Date;
  version: string;
}
