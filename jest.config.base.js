/**
 * The jest configuration every package reuses: TypeScript specs in `test/`, compiled by ts-jest.
 *
 * Jest's per-test bound (`testTimeout`) is a global option: it is read from the root
 * jest.config.js only, and a project's config that sets it is warned about and ignored.
 */
function jestConfig(rootDir, overrides = {}) {
  return {
    rootDir,
    testEnvironment: 'node',
    testMatch: ['<rootDir>/test/**/*.spec.ts'],
    transform: {
      '^.+\\.tsx?$': ['ts-jest', { tsconfig: `${rootDir}/tsconfig.test.json` }]
    },
    ...overrides
  };
}

// JupyterLab's own packages ship ES modules in lib/; so do these dependencies of theirs.
const LAB_ES_MODULES = [
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

/**
 * The configuration of a JupyterLab extension's package: JupyterLab's test environment, its ES
 * modules through babel-jest, the clipboard shim in the package's test/.
 */
jestConfig.labExtension = function labExtensionConfig(rootDir, displayName) {
  const jlab = require('@jupyterlab/testing/lib/jest-config')(rootDir);
  return jestConfig(rootDir, {
    displayName,
    testEnvironment: jlab.testEnvironment,
    setupFiles: [...jlab.setupFiles, '<rootDir>/test/clipboard-shim.js'],
    resolver: jlab.resolver,
    moduleNameMapper: jlab.moduleNameMapper,
    moduleFileExtensions: jlab.moduleFileExtensions,
    transform: {
      '\\.svg$': '@jupyterlab/testing/lib/jest-raw-loader.js',
      '^.+\\.tsx?$': ['ts-jest', { tsconfig: `${rootDir}/tsconfig.test.json` }],
      '^.+\\.m?jsx?$': 'babel-jest'
    },
    transformIgnorePatterns: [`/node_modules/(?!(${LAB_ES_MODULES})/)`],
    modulePathIgnorePatterns: ['<rootDir>/labextension/', '<rootDir>/build/']
  });
};

module.exports = jestConfig;
