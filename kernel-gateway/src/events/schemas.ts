import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import { eventSchemas } from '../protocol/schema';

/**
 * The event schemas the gateway emits (jupyter_server's `event_schemas/*\/v1.yaml`, their data
 * part, kept in `schema/events/`), so that events posted by clients are held to the same shapes.
 */
export class EventSchemas {
  constructor(schemas = eventSchemas()) {
    // Not strict: the schemas carry jupyter_events' `version` beside JSON Schema's keywords.
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    this._ajv = ajv;
    this._validators = new Map(
      [...schemas].map(([id, schema]) => [id, ajv.compile(schema)])
    );
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

  private _ajv: Ajv2020;
  private _validators: Map<string, ValidateFunction>;
}
