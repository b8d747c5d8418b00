/**
 * Authentication: tokens, the browser sign-in cookie, XSRF and browser origins.
 *
 * @packageDocumentation
 */
export * from './browser';
export * from './token';
