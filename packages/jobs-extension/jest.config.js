const jlab = require('@jupyterlab/testing/lib/jest-config')(__dirname);

// JupyterLab's own packages ship ES modules in lib/; so do these dependencies of theirs.
const esModules = [
  '@jupyterlab',
  '@jupyter',
  '@codemirror',
  '@lezer',
  '@marijn',
  '@microsoft',
  'color',
  'exenv-es6',
  'lib0',
  'marked',
  'nanoid',
  'vscode-ws-jsonrpc',
  'y-protocols',
  'y-websocket',
  'yjs'
].join('|');

module.exports = require('../../jest.config.base')(__dirname, {
  displayName: 'jobs-extension',
  testEnvironment: jlab.testEnvironment,
  setupFiles: [...jlab.setupFiles, '<rootDir>/test/clipboard-shim.js'],
  resolver: jlab.resolver,
  moduleNameMapper: jlab.moduleNameMapper,
  moduleFileExtensions: jlab.moduleFileExtensions,
  transform: {
    '\\.svg$': '@jupyterlab/testing/lib/jest-raw-loader.js',
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: `${__dirname}/tsconfig.test.json` }],
    '^.+\\.m?jsx?$': 'babel-jest'
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esModules})/)`],
  modulePathIgnorePatterns: ['<rootDir>/labextension/', '<rootDir>/build/']
});
