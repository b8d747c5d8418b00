/**
 * `ferry kernels`: a gateway's kernels as a table, each with where its devices stand (held, none
 * held until its next cell, queued).
 */
import { Command } from 'commander';
import { formatAccelerator } from '@ferry/accelerator-vocabulary';
import type { RestSchemas } from '../protocol';
import {
  gatewayClient,
  gatewayOptions,
  type IGatewayFlags
} from './gateway-client';
import { textTable } from './table';

/** The `ferry kernels` command. */
export function kernelsCommand(): Command {
  return gatewayOptions(
    new Command('kernels').description(
      "List a gateway's kernels and where their devices stand (held only while used: none held until a cell runs)"
    )
  ).action(async (flags: IGatewayFlags) => {
    const client = await gatewayClient(flags);
    process.stdout.write(kernelsTable(await client.kernels()));
  });
}

/** A table of kernels for a terminal: id, name, state, accelerator, devices. */
export function kernelsTable(models: RestSchemas['Kernel'][]): string {
  return textTable([
    ['ID', 'NAME', 'STATE', 'ACCELERATOR', 'DEVICES'],
    ...models.map(k => [
      k.id.slice(0, 8),
      k.name,
      k.execution_state,
      k.accelerator && k.accelerator.kind !== 'cpu'
        ? formatAccelerator(k.accelerator)
        : 'CPU',
      Private.devices(k.accelerator)
    ])
  ]);
}

namespace Private {
  /** Where a kernel's devices stand, in words. */
  export function devices(
    status: RestSchemas['AcceleratorStatus'] | undefined
  ): string {
    if (!status || status.kind === 'cpu') {
      return '';
    }
    switch (status.state) {
      case 'queued':
        return status.position !== undefined
          ? `queued (#${status.position})`
          : `queued${status.reason ? ` (${status.reason})` : ''}`;
      case 'starting':
        return 'starting';
      case 'ended':
        return 'ended';
    }
    if (status.held === false) {
      return 'no devices held (taken at the next cell)';
    }
    const ids = (status.devices ?? []).map(d => d.id).join(',');
    return `${ids} on ${status.workerName ?? status.worker ?? '?'}`;
  }
}
