module.exports = {
  projects: [
    '<rootDir>/kernel-gateway',
    '<rootDir>/packages/accelerator-vocabulary',
    '<rootDir>/packages/accelerators',
    '<rootDir>/packages/accelerators-extension',
    '<rootDir>/packages/jobs-extension',
    '<rootDir>/packages/sharing-extension'
  ],
  testTimeout: 60000
};
