/**
 * Terminals on the agent's host: shells on ptys, with the kernels' isolation environment and user.
 *
 * @packageDocumentation
 */
export { TerminalProcess } from './terminal-process';
