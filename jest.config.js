module.exports = {
  projects: [
    '<rootDir>/kernel-gateway',
    '<rootDir>/packages/accelerator-vocabulary',
    '<rootDir>/packages/accelerators',
    '<rootDir>/packages/accelerators-extension',
    '<rootDir>/packages/jobs-extension',
    '<rootDir>/packages/sharing-extension'
  ],
  // Every project's per-test bound (a global option: jest reads it here only, never from a
  // project's config). A bound, not a measure: a test that starts gateway processes and kernels
  // can take many seconds on a loaded 2-CPU machine, and jest's 5 s default failed such tests.
  testTimeout: 60_000
};
