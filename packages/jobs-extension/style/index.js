import '@ferry/style/index.js';
