import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import Ajv2020, { type ErrorObject } from 'ajv/dist/2020';
import { parse } from 'yaml';
import { SCHEMA_DIR } from '../protocol/schema';
import type {
  Engine,
  IAcceleratorOffer,
  IEnvironmentProfile,
  IProfiles
} from './types';

/** Raised for a profiles file that cannot be used; the message names the file and the bad field. */
export class ProfilesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProfilesError';
  }
}

/**
 * Read and check an accelerator profiles file (YAML or JSON) against
 * `schema/accelerator-profiles.schema.json`: its offers.
 *
 * @throws {@link ProfilesError} naming the first bad field, or a repeated offer name.
 */
export function loadProfiles(file: string): IAcceleratorOffer[] {
  return loadProfilesFile(file).offers;
}

/**
 * Read and check a profiles file (YAML or JSON): its offers and environment templates.
 *
 * @throws {@link ProfilesError} naming the first bad field, or a repeated name.
 */
export function loadProfilesFile(file: string): IProfiles {
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
  const profiles = checkProfilesFile(data, `profiles file ${file}`);
  const secretFile = profiles.oidc?.client_secret_file;
  if (secretFile !== undefined) {
    // Beside the profiles file, wherever the gateway was started.
    profiles.oidc!.client_secret_file = path.resolve(
      path.dirname(file),
      secretFile
    );
  }
  return profiles;
}

/**
 * Check parsed profiles against the schema: their offers.
 *
 * @param source - where they came from, for messages.
 */
export function checkProfiles(
  data: unknown,
  source = 'profiles'
): IAcceleratorOffer[] {
  return checkProfilesFile(data, source).offers;
}

/**
 * Check parsed profiles against the schema: their offers and environment templates.
 *
 * @param source - where they came from, for messages.
 */
export function checkProfilesFile(
  data: unknown,
  source = 'profiles'
): IProfiles {
  const validate = Private.validator();
  if (!validate(data)) {
    const errors = validate.errors ?? [];
    // The engine rule's branches fail by design; the oneOf itself says what is wrong.
    const error =
      errors.find(
        e =>
          !e.schemaPath.includes('/oneOf/') &&
          !e.schemaPath.startsWith('#/anyOf/')
      ) ?? errors[0];
    const at = error?.instancePath
      ? error.instancePath.slice(1).replace(/\//g, '.')
      : '(top level)';
    throw new ProfilesError(`bad ${source}: ${at}: ${Private.describe(error)}`);
  }
  const profiles = data as Partial<IProfiles>;
  const offers = profiles.offers ?? [];
  const environments = profiles.environments ?? [];
  Private.checkUnique(offers, 'offers', source, 'is offered twice');
  Private.checkUnique(
    environments,
    'environments',
    source,
    'is declared twice'
  );
  return {
    offers,
    environments,
    ...(profiles.oidc ? { oidc: { ...profiles.oidc } } : {}),
    ...(profiles.limits ? { limits: profiles.limits } : {}),
    ...(profiles.accounting ? { accounting: profiles.accounting } : {}),
    ...(profiles.quotas ? { quotas: profiles.quotas } : {}),
    ...(profiles.fairShare ? { fairShare: profiles.fairShare } : {})
  };
}

/** The part of an environment template a static worker is sent (no engine parts). */
export function environmentTemplate(
  profile: IEnvironmentProfile
): IEnvironmentProfile {
  const { slurm: _slurm, kubernetes: _kubernetes, ...template } = profile;
  return template;
}

/** The engine that starts an offer's workers. */
export function offerEngine(offer: IAcceleratorOffer): Engine {
  return offer.slurm ? 'slurm' : 'kubernetes';
}

namespace Private {
  /** What a schema error means, for a person. */
  export function describe(error: ErrorObject | undefined): string {
    switch (error?.keyword) {
      case 'additionalProperties':
        return `unknown field '${String(error.params.additionalProperty)}'`;
      case 'oneOf':
        return 'an offer needs exactly one engine: slurm or kubernetes';
      case 'pattern':
        if (error.propertyName !== undefined) {
          return `'${error.propertyName}' is not a valid name here`;
        }
        return error.params.pattern === '^/'
          ? 'must be an absolute path'
          : (error.message ?? 'invalid');
      case 'propertyNames':
        return `'${String(error.params.propertyName)}' is not a variable name`;
      case 'not':
        return 'an environment takes at most one of kernelspec, interpreter and prefix';
      case 'anyOf':
        return error.instancePath === ''
          ? 'a profiles file declares offers, environments or both'
          : (error.message ?? 'invalid');
      default:
        return error?.message ?? 'invalid';
    }
  }

  /** Throw for a name used twice in a list. */
  export function checkUnique(
    items: { name: string }[],
    list: string,
    source: string,
    twice: string
  ): void {
    const seen = new Set<string>();
    items.forEach((item, i) => {
      if (seen.has(item.name)) {
        throw new ProfilesError(
          `bad ${source}: ${list}.${i}.name: '${item.name}' ${twice}`
        );
      }
      seen.add(item.name);
    });
  }

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
