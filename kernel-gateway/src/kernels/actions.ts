/**
 * Kernel action events (jupyter_server's `kernel_actions`): a start, interrupt, restart or
 * shutdown, done or failed, whoever asked for it (REST, sessions or culling).
 *
 * @packageDocumentation
 */
import type { ManagedKernel } from './kernel';

/** What a kernel action event is about. */
export type KernelAction = 'start' | 'interrupt' | 'restart' | 'shutdown';

/** A start, interrupt, restart or shutdown, done or failed. */
export interface IKernelActionEvent {
  action: KernelAction;
  /** Unknown for a start that failed. */
  kernelId: string | undefined;
  kernelName: string | undefined;
  /** Why it failed; absent when it succeeded. */
  error?: unknown;
}

/**
 * Do `work` and `emit` how it went.
 *
 * @param started - For a start: the kernel it made, which names the event.
 */
export async function announce<T>(
  emit: (event: IKernelActionEvent) => void,
  action: KernelAction,
  kernelId: string | undefined,
  kernelName: string | undefined,
  work: () => Promise<T>,
  started?: (result: T) => ManagedKernel
): Promise<T> {
  try {
    const result = await work();
    const kernel = started?.(result);
    emit({
      action,
      kernelId: kernel?.id ?? kernelId,
      kernelName: kernel?.name ?? kernelName
    });
    return result;
  } catch (error) {
    emit({ action, kernelId, kernelName, error });
    throw error;
  }
}
