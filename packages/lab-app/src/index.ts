/**
 * @packageDocumentation
 * The entry the page loads. Every other file of the bundle is a chunk loaded relative to the static
 * URL the gateway puts in the page config, so the base URL can change without a rebuild.
 */
import { PageConfig } from '@jupyterlab/coreutils';
import { watchSession } from './session';

__webpack_public_path__ = PageConfig.getOption('fullStaticUrl') + '/';

// Before JupyterLab's server connection takes the global fetch: an ended session goes to sign-in.
watchSession();

import('./app')
  .then(({ main }) => main())
  .catch(error => {
    console.error('JupyterLab failed to start', error);
  });
