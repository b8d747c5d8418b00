/**
 * The picker's choices as the gateway answers them: the browser predicts nothing. The gateway's
 * scheduler says what each choice would do now (`/api/accelerators`'s `choices` for a new kernel,
 * `/api/accelerators/choices` for a kernel that would move or another environment); this module
 * fetches them, and reads from the live model where a kernel stands and which environments
 * connected workers have.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type { AcceleratorClient } from './client';
import { isKernel } from './labels';
import type { IAcceleratorStatus, IAccelerators } from './models';

/**
 * One choice the picker offers and what choosing it would do now, as the scheduler answers it:
 * schema `AcceleratorChoice` (`free`: starts now; `queued` at `queuePosition` among the requests
 * that compete for the same devices; `unavailable`: never, with the `reason`).
 */
export type IAcceleratorOffer = IAccelerators['choices'][number];

/**
 * Ask the gateway what each choice would do for a kernel that would move (its devices count as
 * free for it, its queue entry is not ahead of it, its current choice is marked) or in an
 * environment: `GET /api/accelerators/choices`.
 *
 * @param client - The client of the gateway.
 * @param kernelId - The kernel that would move, if any.
 * @param environment - The environment to run in (`null` or left out: none).
 */
export async function fetchChoices(
  client: AcceleratorClient,
  kernelId?: string,
  environment?: string | null
): Promise<IAcceleratorOffer[]> {
  const settings = client.serverSettings;
  const query = new URLSearchParams();
  if (kernelId) {
    query.set('kernel', kernelId);
  }
  if (environment) {
    query.set('environment', environment);
  }
  const search = query.toString();
  const url =
    URLExt.join(settings.baseUrl, 'api/accelerators/choices') +
    (search ? `?${search}` : '');
  const response = await ServerConnection.makeRequest(
    url,
    { method: 'GET' },
    settings
  );
  if (!response.ok) {
    throw await ServerConnection.ResponseError.create(response);
  }
  return ((await response.json()) as { choices: IAcceleratorOffer[] }).choices;
}

/**
 * Where a kernel's request stands, from the live model alone: queued with its position, assigned
 * with the devices that list it as holder, or `undefined` when the model does not mention it (a
 * CPU kernel, or one the gateway does not know).
 *
 * @param model - The `/api/accelerators` model.
 * @param kernelId - The kernel.
 */
export function kernelStatus(
  model: IAccelerators,
  kernelId: string
): IAcceleratorStatus | undefined {
  const queued = model.queue.find(entry => isKernel(entry.holder, kernelId));
  if (queued) {
    const { holder: _holder, since, ...request } = queued;
    return { ...request, state: 'queued', since };
  }
  for (const worker of model.workers) {
    const devices = worker.devices.filter(device =>
      device.holders.some(holder => isKernel(holder, kernelId))
    );
    if (devices.length > 0) {
      const first = devices[0];
      const status: IAcceleratorStatus = {
        kind: first.kind,
        model: first.model,
        count: devices.length,
        state: 'assigned',
        worker: worker.id,
        workerName: worker.name,
        devices: devices.map(device => ({
          id: device.id,
          kind: device.kind,
          model: device.model,
          profile: device.profile,
          simulated: device.simulated
        }))
      };
      if (first.profile) {
        status.profile = first.profile;
      }
      return status;
    }
  }
  return undefined;
}

/**
 * The environments a picker offers: each template of the profiles file, with why none of the
 * connected workers has it (`undefined` when one does).
 *
 * @param model - The `/api/accelerators` model.
 */
export function environmentChoices(
  model: IAccelerators | null
): IEnvironmentChoice[] {
  const connected = (model?.workers ?? []).filter(worker => worker.connected);
  return (model?.environments ?? []).map(environment => {
    const has = connected.some(worker =>
      (worker.environments ?? []).some(
        e => e.name === environment.name && e.available
      )
    );
    return has
      ? { name: environment.name, displayName: environment.displayName }
      : {
          name: environment.name,
          displayName: environment.displayName,
          unavailable: connected.length
            ? `on no connected worker (${connected
                .map(
                  worker =>
                    `${worker.name}: ${
                      (worker.environments ?? []).find(
                        e => e.name === environment.name
                      )?.reason ?? 'not reported'
                    }`
                )
                .join('; ')})`
            : 'no worker is connected'
        };
  });
}

/**
 * An environment the picker offers.
 */
export interface IEnvironmentChoice {
  /** Its name, as a kernel start asks for it. */
  name: string;
  /** `PyTorch`. */
  displayName: string;
  /** Why no connected worker has it, when none does. */
  unavailable?: string;
}
