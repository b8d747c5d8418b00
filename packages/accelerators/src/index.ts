/**
 * @packageDocumentation
 * @module accelerators
 * Ferry's accelerators for JupyterLab: tokens, the models of the REST contract, the client and
 * pushed stream of `/api/accelerators`, the notebook-metadata mapping of an accelerator choice
 * (Ferry, Colab, Kaggle), labels, the picker, sidebar and status bar widgets, and the actions on a
 * notebook's accelerator (change it, apply its saved choice, measure its speed).
 */

export * from './actions';
export * from './benchmark';
export * from './choice-facts';
export * from './client';
export * from './dashboard';
export * from './dialog';
export * from './gateway';
export * from './holds';
export * from './kernelspecs';
export * from './labels';
export * from './manager';
export * from './metadata';
export * from './models';
export * from './notices';
export * from './offers';
export * from './panel';
export * from './picker';
export * from './statusitem';
export * from './stream';
export * from './tokens';
export * from './usage';
