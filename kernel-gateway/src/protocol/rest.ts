/**
 * The types of the REST contract, generated from `schema/openapi.yaml`: `npm run generate` (which
 * `npm run build` runs) writes `generated/openapi.ts` with openapi-typescript. Code names a schema
 * as `RestSchemas['Kernel']`, or aliases it under the name it always had, never restating its
 * shape: a change to the contract is then a type error wherever the gateway builds or reads what
 * changed.
 */
import type { components } from './generated/openapi';

/** Every schema of the REST contract, by its name under `components.schemas`. */
export type RestSchemas = components['schemas'];
