import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import { parse } from 'yaml';
import { SCHEMA_DIR } from '../protocol/schema';
import type { Engine, IAcceleratorOffer } from './types';

/** Raised for a profiles file that cannot be used; the message names the file and the bad field. */
export class ProfilesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProfilesError';
  }
}

/**
 * Read and check an accelerator profiles file (YAML or JSON) against
 * `schema/accelerator-profiles.schema.json`.
 *
 * @throws {@link ProfilesError} naming the first bad field, or a repeated offer name.
 */
export function loadProfiles(file: string): IAcceleratorOffer[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ProfilesError(
      `cannot read profiles file ${file}: ${(error as Error).message}`
    );
  }
  let data: unknown;
  try {
    data = parse(text);
  } catch (error) {
    throw new ProfilesError(
      `profiles file ${file} is not valid YAML or JSON: ${(error as Error).message}`
    );
  }
  return checkProfiles(data, `profiles file ${file}`);
}

/**
 * Check parsed profiles against the schema.
 *
 * @param source - where they came from, for messages.
 */
export function checkProfiles(
  data: unknown,
  source = 'profiles'
): IAcceleratorOffer[] {
  const validate = Private.validator();
  if (!validate(data)) {
    const errors = validate.errors ?? [];
    // The engine rule's branches fail by design; the oneOf itself says what is wrong.
    const error =
      errors.find(e => !e.schemaPath.includes('/oneOf/')) ?? errors[0];
    const at = error?.instancePath
      ? error.instancePath.slice(1).replace(/\//g, '.')
      : '(top level)';
    const detail =
      error?.keyword === 'additionalProperties'
        ? `unknown field '${String(error.params.additionalProperty)}'`
        : error?.keyword === 'oneOf'
          ? 'an offer needs exactly one engine: slurm or kubernetes'
          : (error?.message ?? 'invalid');
    throw new ProfilesError(`bad ${source}: ${at}: ${detail}`);
  }
  const offers = (data as { offers: IAcceleratorOffer[] }).offers;
  const seen = new Set<string>();
  offers.forEach((offer, i) => {
    if (seen.has(offer.name)) {
      throw new ProfilesError(
        `bad ${source}: offers.${i}.name: '${offer.name}' is offered twice`
      );
    }
    seen.add(offer.name);
  });
  return offers;
}

/** The engine that starts an offer's workers. */
export function offerEngine(offer: IAcceleratorOffer): Engine {
  return offer.slurm ? 'slurm' : 'kubernetes';
}

namespace Private {
  let compiled: ReturnType<Ajv2020['compile']> | undefined;

  export function validator(): ReturnType<Ajv2020['compile']> {
    if (!compiled) {
      const schema = JSON.parse(
        readFileSync(
          path.join(SCHEMA_DIR, 'accelerator-profiles.schema.json'),
          'utf8'
        )
      );
      compiled = new Ajv2020({
        allErrors: false,
        strict: true,
        // The engine rule names fields in a oneOf, which strict mode would take for a typo.
        strictRequired: false,
        allowUnionTypes: true
      }).compile(schema);
    }
    return compiled;
  }
}
