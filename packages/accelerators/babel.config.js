// babel-jest turns the ES modules of JupyterLab 4.6's packages into CommonJS for jest.
module.exports = require('@jupyterlab/testing/lib/babel-config').default;
