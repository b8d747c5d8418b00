/**
 * @packageDocumentation
 * @module accelerator-vocabulary
 * Ferry's accelerator vocabulary, the one both the gateway and the browser speak: an accelerator
 * request parsed from and written back to its environment form (`gpu:H100:1`, `tpu:v5e:4`,
 * `offer:NAME`), checked in its REST form, compared ({@link sameRequest}) and labelled for people
 * (`GPU · H100 × 1`, `Queued · #2`). No DOM, no lumino: the gateway runs it in Node.
 */

export * from './holders';
export * from './labels';
export * from './models';
export * from './request';
