import type { JupyterLab } from '@jupyterlab/application';

declare global {
  /** Where the bundle's chunks are loaded from (rspack's public path, set at run time). */
  let __webpack_public_path__: string;

  interface Window {
    /** The running application, for browser tests and the developer console. */
    jupyterapp?: JupyterLab;
  }
}
