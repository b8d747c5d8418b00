module.exports = require('../../jest.config.base').labExtension(
  __dirname,
  'jobs-extension'
);
