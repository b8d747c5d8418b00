import type { Logger } from 'pino';
import type { IIdentityResolver } from '../auth';
import type { IGatewayOptions } from '../config';
import type { KernelRegistry, SessionStore } from '../kernels';
import type { ApiSchemas } from '../protocol/schema';
import type { UserSpaces } from '../users';

/** What every router of the gateway works with. */
export interface IGatewayContext {
  options: IGatewayOptions;
  registry: KernelRegistry;
  sessions: SessionStore;
  schemas: ApiSchemas;
  logger: Logger;
  startedAt: Date;
  version: string;
  /** Who a request acts as (routes that make or list things of one's own ask it). */
  auth: IIdentityResolver;
  /** Each user's space and the ownership rule (users/ownership.ts). */
  spaces: UserSpaces;
}
