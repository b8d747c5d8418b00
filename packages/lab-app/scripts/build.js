// Builds build/: static/ (the bundle), schemas/, themes/ and lab.json, which
// tells the gateway the entry file and which plugins are left out.
const path = require('node:path');
const fs = require('node:fs');
const zlib = require('node:zlib');
const { promisify } = require('node:util');
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
  const gzipped = await gzipAssets(
    path.join(buildDir, 'static'),
    app.assets.map(asset => asset.name)
  );
  console.log(
    `lab-app: ${app.assets.length} files, ${(bytes / 2 ** 20).toFixed(1)} MiB in build/static (${(gzipped / 2 ** 20).toFixed(1)} MiB gzipped), entry ${lab.entry}`
  );
}

/**
 * Write a gzip copy beside every text asset worth compressing (the gateway serves it to browsers
 * that accept gzip), so no request pays for compression. Returns the bytes a browser then fetches.
 */
async function gzipAssets(dir, names) {
  const gzip = promisify(zlib.gzip);
  let total = 0;
  await Promise.all(
    names.map(async name => {
      const file = path.join(dir, name);
      const data = await fs.promises.readFile(file);
      if (
        !/\.(js|css|json|svg|html|txt|map)$/.test(name) ||
        data.length < 1024
      ) {
        total += data.length;
        return;
      }
      const compressed = await gzip(data, { level: 9 });
      total += compressed.length;
      await fs.promises.writeFile(`${file}.gz`, compressed);
    })
  );
  return total;
}

main().catch(error => {
  console.error(error);
  process.exitCode = 1;
});
