// Builds build/: static/ (the bundle), schemas/, themes/ and lab.json, which
// tells the gateway the entry file and which plugins are left out.
const path = require('node:path');
const fs = require('node:fs');
const configs = require('../rspack.config.js');
const packageData = require('../package.json');

const { rspack } = configs;
const buildDir = path.join(__dirname, '..', 'build');

function run(compiler) {
  return new Promise((resolve, reject) => {
    compiler.run((error, stats) => {
      compiler.close(closeError => {
        if (error || closeError) {
          reject(error ?? closeError);
        } else {
          resolve(stats);
        }
      });
    });
  });
}

async function main() {
  // No manifest while the build is under way or after it failed.
  fs.rmSync(path.join(buildDir, 'lab.json'), { force: true });
  const stats = await run(rspack(configs));
  const summary = stats.toJson({
    all: false,
    errors: true,
    warnings: true,
    entrypoints: true,
    assets: true
  });
  if (stats.hasErrors() || stats.hasWarnings()) {
    console.error(
      stats.toString({ all: false, errors: true, warnings: true, colors: true })
    );
  }
  if (stats.hasErrors()) {
    process.exitCode = 1;
    return;
  }
  const app = summary.children.find(child => child.name === 'app');
  const entryFiles = app.entrypoints.lab.assets.map(asset => asset.name);
  const scripts = entryFiles.filter(file => file.endsWith('.js'));
  if (scripts.length !== 1) {
    throw new Error(`Expected one entry script, got ${entryFiles.join(', ')}`);
  }
  const lab = {
    version: require('@jupyterlab/application/package.json').version,
    entry: scripts[0],
    styles: entryFiles.filter(file => file.endsWith('.css')),
    // Under static/: the bundled packages and their licences, as /lab/api/licenses reports them.
    licenses: 'third-party-licenses.json',
    disabled: packageData.jupyterlab.leftOut.plugins,
    leftOutPackages: packageData.jupyterlab.leftOut.packages
  };
  fs.writeFileSync(
    path.join(buildDir, 'lab.json'),
    JSON.stringify(lab, null, 2) + '\n'
  );
  const bytes = app.assets.reduce((total, asset) => total + asset.size, 0);
  console.log(
    `lab-app: ${app.assets.length} files, ${(bytes / 2 ** 20).toFixed(1)} MiB in build/static, entry ${lab.entry}`
  );
}

main().catch(error => {
  console.error(error);
  process.exitCode = 1;
});
