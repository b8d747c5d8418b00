import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';

/** The repository's `schema/` folder: every contract Ferry validates against lives there. */
export const SCHEMA_DIR = path.resolve(__dirname, '..', '..', '..', 'schema');

/**
 * The schemas of the REST contract (`schema/openapi.yaml`), compiled once, by name.
 */
export class ApiSchemas {
  constructor(file = path.join(SCHEMA_DIR, 'openapi.yaml')) {
    const doc = parse(readFileSync(file, 'utf8')) as {
      components: { schemas: Record<string, unknown> };
    };
    // Component refs point into the OpenAPI document; re-root them under $defs for Ajv.
    const defs = JSON.parse(
      JSON.stringify(doc.components.schemas).replace(
        /#\/components\/schemas\//g,
        '#/$defs/'
      )
    );
    // verbose: each error carries its schema, whose `x-form` says what a pattern wants.
    this._ajv = new Ajv2020({ allErrors: true, strict: true, verbose: true });
    addFormats(this._ajv);
    this._ajv.addKeyword({ keyword: ApiSchemas.FORM, schemaType: 'string' });
    this._ajv.addSchema({ $id: ApiSchemas.ID, $defs: defs });
  }

  /** The validator of the schema named `name` under `components.schemas`. */
  validator(name: string): ValidateFunction {
    const validate = this._ajv.getSchema(`${ApiSchemas.ID}#/$defs/${name}`);
    if (!validate) {
      throw new Error(`no schema named ${name} in the REST contract`);
    }
    return validate;
  }

  /**
   * A one-line account of a validator's last errors, for a person. A field the contract does not
   * know is named (a typo such as `modle` is the usual cause), and then only those are told: the
   * other errors a `oneOf` adds (every form the value did not take) would bury it. A field counts as
   * unknown when every form that refused extra fields refused it (`kind` is unknown to the offer
   * form of an accelerator request, but not to the request itself).
   */
  describe(validate: ValidateFunction): string {
    // Per place in the body: the forms (schema paths) that refused fields, and who refused each.
    const places = new Map<
      string,
      { forms: Set<string>; fields: Map<string, Set<string>> }
    >();
    for (const error of validate.errors ?? []) {
      const field =
        error.keyword === 'additionalProperties'
          ? error.params.additionalProperty
          : error.keyword === 'unevaluatedProperties'
            ? error.params.unevaluatedProperty
            : undefined;
      if (typeof field !== 'string') {
        continue;
      }
      let place = places.get(error.instancePath);
      if (!place) {
        place = { forms: new Set(), fields: new Map() };
        places.set(error.instancePath, place);
      }
      place.forms.add(error.schemaPath);
      let refusedBy = place.fields.get(field);
      if (!refusedBy) {
        refusedBy = new Set();
        place.fields.set(field, refusedBy);
      }
      refusedBy.add(error.schemaPath);
    }
    const unknown: string[] = [];
    for (const [instancePath, { forms, fields }] of places) {
      for (const [field, refusedBy] of fields) {
        if (refusedBy.size === forms.size) {
          unknown.push(`body${instancePath} has an unknown field "${field}"`);
        }
      }
    }
    if (unknown.length > 0) {
      return unknown.join(', ');
    }
    // A pattern is for the contract; a person is told the form its `x-form` gives, and what they
    // sent.
    const errors = (validate.errors ?? []).map(error => {
      const form = (
        error.parentSchema as Record<string, unknown> | undefined
      )?.[ApiSchemas.FORM];
      return error.keyword === 'pattern' && typeof form === 'string'
        ? {
            ...error,
            message: `must be ${form} (not ${JSON.stringify(error.data)})`
          }
        : error;
    });
    return this._ajv.errorsText(errors, { dataVar: 'body' });
  }

  private _ajv: Ajv2020;
}

export namespace ApiSchemas {
  export const ID = 'ferry-rest-api';
  /**
   * The schema keyword (an OpenAPI extension) that names, for a person, the form a `pattern`
   * wants: a refused value is told "must be <form>" rather than shown the regular expression.
   */
  export const FORM = 'x-form';
}

/**
 * The event schemas of `schema/events/` (one JSON Schema per file: the data of one kind of event,
 * named by its `$id`, such as jupyter_server's `.../kernel_actions/v1`), by `$id`.
 *
 * @param dir - the folder to read (default `schema/events/`).
 */
export function eventSchemas(
  dir = path.join(SCHEMA_DIR, 'events')
): Map<string, Record<string, unknown>> {
  const schemas = new Map<string, Record<string, unknown>>();
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith('.json')) {
      continue;
    }
    const schema = JSON.parse(
      readFileSync(path.join(dir, file), 'utf8')
    ) as Record<string, unknown>;
    if (typeof schema.$id !== 'string') {
      throw new Error(`event schema ${file} has no $id`);
    }
    schemas.set(schema.$id, schema);
  }
  return schemas;
}
