/**
 * The kernel registry: lifecycle, activity, culling, restart in place; and the sessions over it.
 *
 * @packageDocumentation
 */
export * from './registry';
export * from './sessions';
export * from './working-dir';
export * from './env-policy';
export * from './accelerator-kernelspecs';
