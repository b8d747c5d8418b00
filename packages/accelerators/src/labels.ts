/**
 * The accelerator vocabulary the gateway speaks too, from `@ferry/accelerator-vocabulary`: labels
 * for people (`GPU · H100 × 1`, `Queued · #2`), the environment form of a choice (`gpu:H100:1`,
 * `offer:NAME`) and when two choices are the same.
 */
export {
  formatAccelerator,
  formatAcceleratorSpec,
  formatDevice,
  formatEngine,
  formatEngineOffer,
  formatGiB,
  formatHolder,
  formatStatus,
  formatWait,
  parseAcceleratorSpec,
  parseOfferSpec,
  deviceType,
  isKernel,
  sameRequest
} from '@ferry/accelerator-vocabulary';
