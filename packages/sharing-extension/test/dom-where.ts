/**
 * What the extension's DOM specs wait with: no sleeps, the DOM itself says when.
 */

/** Resolves once `check` holds, looking again at each DOM change under `node`. */
export function domWhere(node: Node, check: () => boolean): Promise<void> {
  if (check()) {
    return Promise.resolve();
  }
  return new Promise(resolve => {
    const observer = new MutationObserver(() => {
      if (check()) {
        observer.disconnect();
        resolve();
      }
    });
    observer.observe(node, {
      subtree: true,
      childList: true,
      characterData: true,
      attributes: true
    });
  });
}
