/**
 * The jest configuration every package reuses: TypeScript specs in `test/`, compiled by ts-jest.
 */
module.exports = function jestConfig(rootDir, overrides = {}) {
  return {
    rootDir,
    testEnvironment: 'node',
    // A bound, not a measure: a test that starts gateway processes and kernels can take several
    // seconds on a loaded 2-CPU machine, and jest's 5 s default failed such tests there.
    testTimeout: 30_000,
    testMatch: ['<rootDir>/test/**/*.spec.ts'],
    transform: {
      '^.+\\.tsx?$': ['ts-jest', { tsconfig: `${rootDir}/tsconfig.test.json` }]
    },
    ...overrides
  };
};
