/**
 * Collaboration rooms: JupyterLab's yjs protocol, the documents' store, file <-> doc, server-side
 * execution.
 *
 * @packageDocumentation
 */
export { FileIdStore } from './file-ids';
