// jsdom has no Clipboard API; @jupyterlab/apputils warns about it when it loads.
if (typeof navigator !== 'undefined' && !navigator.clipboard) {
  Object.defineProperty(navigator, 'clipboard', {
    value: { writeText: async () => undefined, readText: async () => '' }
  });
}
