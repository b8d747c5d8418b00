import Ajv, { type ValidateFunction } from 'ajv';
import { EventBus } from './bus';

/**
 * The event schemas the gateway emits (jupyter_server's `event_schemas/*\/v1.yaml`, their data
 * part), so that events posted by clients are held to the same shapes.
 */
export class EventSchemas {
  constructor() {
    const ajv = new Ajv({ allErrors: true, strict: false });
    this._ajv = ajv;
    this._validators = new Map([
      [EventBus.KERNEL_ACTIONS, ajv.compile(Private.KERNEL_ACTIONS)],
      [EventBus.CONTENTS_SERVICE, ajv.compile(Private.CONTENTS_SERVICE)]
    ]);
  }

  /** The schema ids known, each at version "1". */
  get ids(): string[] {
    return [...this._validators.keys()];
  }

  /** Why `data` is not a valid event of `schemaId`, or undefined when it is. */
  problem(schemaId: string, data: unknown): string | undefined {
    const validate = this._validators.get(schemaId);
    if (!validate) {
      return `Unregistered schema: ${schemaId}`;
    }
    return validate(data)
      ? undefined
      : this._ajv.errorsText(validate.errors, { dataVar: 'data' });
  }

  private _ajv: Ajv;
  private _validators: Map<string, ValidateFunction>;
}

namespace Private {
  export const KERNEL_ACTIONS = {
    type: 'object',
    required: ['action', 'msg'],
    properties: {
      action: { enum: ['start', 'interrupt', 'shutdown', 'restart'] },
      kernel_id: { type: 'string' },
      kernel_name: { type: 'string' },
      status: { enum: ['error', 'success'] },
      status_code: { type: 'number' },
      msg: { type: 'string' }
    },
    if: {
      not: {
        properties: { status: { const: 'error' }, action: { const: 'start' } }
      }
    },
    then: { required: ['kernel_id'] }
  };

  export const CONTENTS_SERVICE = {
    type: 'object',
    required: ['action', 'path'],
    properties: {
      action: {
        enum: ['get', 'create', 'save', 'upload', 'rename', 'copy', 'delete']
      },
      path: { type: 'string' },
      source_path: { type: 'string' }
    }
  };
}
