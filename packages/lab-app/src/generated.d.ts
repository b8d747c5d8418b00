/** Lazy imports of the bundled extension modules, generated from package.json by rspack.config.js. */
declare module '@ferry/lab-app-generated/extensions.js' {
  /** Each entry: the package name and a function that imports its plugin module. */
  type ModuleList = ReadonlyArray<readonly [string, () => Promise<unknown>]>;
  export const extensions: ModuleList;
  export const mimeExtensions: ModuleList;
  /** Ids of bundled plugins left out: they need server APIs Ferry does not offer. */
  export const leftOut: readonly string[];
}
