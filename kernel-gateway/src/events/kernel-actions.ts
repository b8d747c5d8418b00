import type { KernelRegistry } from '../kernels';
import { EventBus } from './bus';

type Action = 'start' | 'interrupt' | 'restart' | 'shutdown';

/**
 * Publish a `kernel_actions` event for every start, interrupt, restart and shutdown the registry
 * performs, whoever asked (REST, sessions, culling), with jupyter_server's fields and messages.
 *
 * #### Notes
 * jupyter_server decorates its kernel manager's methods the same way (`emit_kernel_action_event`);
 * here the registry instance's methods are wrapped, so the registry itself needs no event plumbing.
 */
export function publishKernelActions(
  registry: KernelRegistry,
  bus: EventBus
): void {
  const emit = (
    action: Action,
    id: string | undefined,
    name: string | undefined,
    error?: unknown
  ) => {
    const data: Record<string, unknown> = {
      action,
      status: error === undefined ? 'success' : 'error',
      msg:
        error === undefined
          ? `Kernel ${id} was ${Private.PAST[action]}.`
          : String((error as Error)?.message ?? error)
    };
    if (name !== undefined) {
      data.kernel_name = name;
    }
    if (id !== undefined) {
      data.kernel_id = id;
    }
    const status = (error as { status?: unknown } | undefined)?.status;
    if (typeof status === 'number') {
      data.status_code = status;
    }
    bus.emit(EventBus.KERNEL_ACTIONS, data);
  };

  const start = registry.start.bind(registry);
  registry.start = async request => {
    try {
      const kernel = await start(request);
      emit('start', kernel.id, kernel.name);
      return kernel;
    } catch (error) {
      emit('start', undefined, request.name, error);
      throw error;
    }
  };
  for (const action of ['interrupt', 'restart', 'shutdown'] as const) {
    const original = registry[action].bind(registry) as (
      id: string,
      ...rest: unknown[]
    ) => Promise<unknown>;
    (registry as unknown as Record<Action, typeof original>)[action] = async (
      id,
      ...rest
    ) => {
      const name = registry.get(id)?.name;
      try {
        const result = await original(id, ...rest);
        emit(action, id, name);
        return result;
      } catch (error) {
        emit(action, id, name, error);
        throw error;
      }
    };
  }
}

namespace Private {
  export const PAST: Record<Action, string> = {
    start: 'started',
    interrupt: 'interrupted',
    restart: 'restarted',
    shutdown: 'shutdown'
  };
}
