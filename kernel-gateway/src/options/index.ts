/**
 * Every option of `ferry gateway` and `ferry worker`, each written once in a table, and what is
 * derived from the tables: the flags' types, the settings they give, a gateway's defaults and the
 * reference page. cli/ turns the tables into commands.
 */
export * from './gateway';
export * from './kernel-host';
export * from './reference';
export * from './table';
export * from './values';
export * from './worker';
