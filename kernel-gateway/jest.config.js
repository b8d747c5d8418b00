// @kubernetes/client-node 1.x and some of its dependencies ship only ES modules. Node 20 loads them
// with require(); jest's module system cannot, so babel-jest turns them into CommonJS for the tests.
const esModules = [
  '@kubernetes/client-node',
  'openid-client',
  'oauth4webapi',
  'jose',
  'jsonpath-plus',
  'jsep',
  '@jsep-plugin',
  'rfc4648',
  // JupyterLab's own notebook model, for the collaboration specs
  '@jupyter/ydoc'
].join('|');

module.exports = require('../jest.config.base')(__dirname, {
  displayName: 'kernel-gateway',
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: `${__dirname}/tsconfig.test.json` }],
    '/node_modules/.+\\.m?js$': [
      'babel-jest',
      {
        configFile: false,
        babelrc: false,
        presets: [['@babel/preset-env', { targets: { node: 'current' } }]]
      }
    ]
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esModules})/)`]
});
