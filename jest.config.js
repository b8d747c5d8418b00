module.exports = {
  projects: [
    '<rootDir>/kernel-gateway',
    '<rootDir>/packages/accelerators',
    '<rootDir>/packages/accelerators-extension'
  ],
  testTimeout: 60000
};
