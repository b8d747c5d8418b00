module.exports = require('../../jest.config.base')(__dirname, {
  displayName: 'accelerators',
  setupFiles: ['<rootDir>/test/jsdom-shim.js'],
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: `${__dirname}/tsconfig.test.json` }],
    // JupyterLab's translation package ships ES modules only.
    '^.+\\.m?jsx?$': 'babel-jest'
  },
  transformIgnorePatterns: ['/node_modules/(?!(@jupyterlab/translation)/)']
});
