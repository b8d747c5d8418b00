/**
 * Terminals: shells on the workers' hosts, beside a kernel or on devices of their own, served to
 * browsers over terminado's websocket protocol, with their recent output kept for reconnections.
 *
 * @packageDocumentation
 */
export { TerminalError } from './errors';
export { TerminalOutput } from './output';
export { type ITerminalRequest, TerminalRegistry } from './registry';
export { ManagedTerminal, type TerminalState } from './terminal';
