import type { KernelRegistry } from '../kernels';
import { EventBus } from './bus';

type Action = KernelRegistry.KernelAction;

/**
 * Publish a `kernel_actions` event for every start, interrupt, restart and shutdown the registry
 * performs, whoever asked (REST, sessions, culling), with jupyter_server's fields and messages.
 */
export function publishKernelActions(
  registry: KernelRegistry,
  bus: EventBus
): void {
  registry.on('action', ({ action, kernelId, kernelName, error }) => {
    const data: Record<string, unknown> = {
      action,
      status: error === undefined ? 'success' : 'error',
      msg:
        error === undefined
          ? `Kernel ${kernelId} was ${Private.PAST[action]}.`
          : String((error as Error)?.message ?? error)
    };
    if (kernelName !== undefined) {
      data.kernel_name = kernelName;
    }
    if (kernelId !== undefined) {
      data.kernel_id = kernelId;
    }
    const status = (error as { status?: unknown } | undefined)?.status;
    if (typeof status === 'number') {
      data.status_code = status;
    }
    bus.emit(EventBus.KERNEL_ACTIONS, data);
  });
}

namespace Private {
  export const PAST: Record<Action, string> = {
    start: 'started',
    interrupt: 'interrupted',
    restart: 'restarted',
    shutdown: 'shutdown'
  };
}
