import type { RequestHandler } from 'express';
import type { RestSchemas } from '../protocol/rest';
import type { ApiSchemas } from '../protocol/schema';
import { HttpError } from './errors';

/** Reject a request whose JSON body does not match the named schema of the REST contract. */
export function validateBody(
  schemas: ApiSchemas,
  name: keyof RestSchemas
): RequestHandler<Record<string, string>> {
  const validate = schemas.validator(name);
  return (request, _response, next) => {
    request.body ??= {};
    if (!validate(request.body)) {
      throw new HttpError(
        400,
        `Invalid request body: ${schemas.describe(validate)}`
      );
    }
    next();
  };
}
