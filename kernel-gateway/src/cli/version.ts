/**
 * The version `ferry --version` prints and the gateway and workers report: this package's.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

/** This package's version. */
export const VERSION: string = JSON.parse(
  readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')
).version;
