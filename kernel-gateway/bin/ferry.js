#!/usr/bin/env node
'use strict';
require('../lib/cli')
  .createProgram()
  .parseAsync(process.argv)
  .catch(error => {
    process.stderr.write(
      `ferry: ${error instanceof Error ? error.message : error}\n`
    );
    process.exit(1);
  });
