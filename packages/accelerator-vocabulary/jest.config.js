module.exports = require('../../jest.config.base')(__dirname, {
  displayName: 'accelerator-vocabulary'
});
