/**
 * The jest configuration every package reuses: TypeScript specs in `test/`, compiled by ts-jest.
 */
module.exports = function jestConfig(rootDir, overrides = {}) {
  return {
    rootDir,
    testEnvironment: 'node',
    testMatch: ['<rootDir>/test/**/*.spec.ts'],
    transform: {
      '^.+\\.tsx?$': ['ts-jest', { tsconfig: `${rootDir}/tsconfig.test.json` }]
    },
    ...overrides
  };
};
