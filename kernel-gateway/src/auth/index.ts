/**
 * Authentication: tokens, the browser sign-in cookie, XSRF, browser origins, and the limits on what
 * one client may ask (kernels, starts, messages, wrong tokens).
 *
 * @packageDocumentation
 */
export * from './browser';
export * from './limits';
export * from './token';
