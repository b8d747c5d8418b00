/**
 * The types of the REST contract, generated from `schema/openapi.yaml` into `@ferry/rest-contract`
 * (the one copy the gateway and the extensions share). Code names a schema as
 * `RestSchemas['Kernel']`, or aliases it under the name it always had, never restating its shape: a
 * change to the contract is then a type error wherever the gateway builds or reads what changed.
 */
export type { RestSchemas } from '@ferry/rest-contract';
