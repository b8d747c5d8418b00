import '@ferry/accelerators/style/index.js';
