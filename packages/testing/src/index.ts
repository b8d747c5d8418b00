/**
 * @packageDocumentation
 * @module testing
 * Ferry's test utilities for the browser packages, as `@jupyterlab/testing` is JupyterLab's: the
 * real `ferry gateway` with simulated GPUs, a picture of a cluster and an accelerator manager the
 * test drives by hand, waiting for a signal, and kernelspecs whose Python lacks a module.
 */

export * from './choices';
export * from './cluster';
export * from './gateway';
export * from './manager';
export * from './python';
export * from './signal';
