/**
 * `npm run docs:options`: write docs/options.md from the option tables
 * (kernel-gateway/src/options/, as built in lib/), laid out as prettier lays out every page.
 * `--stdout` prints the page instead (the test that fails when the page is stale compares it).
 */
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';

const require = createRequire(import.meta.url);
const {
  optionsReference
} = require('../kernel-gateway/lib/options/reference.js');
const page = fileURLToPath(new URL('../docs/options.md', import.meta.url));
const text = await prettier.format(optionsReference(), {
  ...(await prettier.resolveConfig(page)),
  filepath: page
});
if (process.argv.includes('--stdout')) {
  process.stdout.write(text);
} else {
  writeFileSync(page, text);
}
