/**
 * Accounting (issue #26): the ledger of device allocations, quotas per user and group, and the
 * weights and durations they are written in.
 */
export * from './durations';
export * from './ledger';
export * from './quotas';
export * from './weights';
