/**
 * Authentication: tokens and browser origins.
 *
 * @packageDocumentation
 */
export * from './token';
