/**
 * @packageDocumentation
 * @module rest-contract
 * The types of Ferry's REST contract, generated from `schema/openapi.yaml`: `npm run generate`
 * (which `npm run build` runs) writes `generated/openapi.ts` with openapi-typescript, types only.
 * The gateway and every extension name a schema as `RestSchemas['Share']`, or alias it under a name
 * of their own, never restating its shape: a change to the contract is then a type error wherever
 * either side builds or reads what changed.
 */
import type { components } from './generated/openapi';

/** Every schema of the REST contract, by its name under `components.schemas`. */
export type RestSchemas = components['schemas'];
