module.exports = require('../../jest.config.base')(__dirname, {
  displayName: 'accelerators',
  setupFiles: ['<rootDir>/test/jsdom-shim.js']
});
