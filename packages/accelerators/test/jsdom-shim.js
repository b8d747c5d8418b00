// jsdom lacks DragEvent, which @lumino/dragdrop subclasses when it loads (as JupyterLab's own
// jest shim provides). Node-environment specs have no window and need nothing.
if (typeof window !== 'undefined' && typeof window.DragEvent === 'undefined') {
  window.DragEvent = class DragEvent extends window.MouseEvent {
    constructor(type, init = {}) {
      super(type, init);
      this.dataTransfer = init.dataTransfer ?? null;
    }
  };
}
