export { StateStore, type StateEncoding } from './state-store';
