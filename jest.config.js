module.exports = {
  projects: ['<rootDir>/kernel-gateway'],
  testTimeout: 60000
};
