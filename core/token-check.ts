/**
 * The check a token file carries of itself (`check:`, near its top): the first 16 hex digits of
 * the SHA-256 of its other fields, as JSON with sorted keys. A token is carried by hand, through
 * clipboards and mail; a file cut short or changed on the way then fails the check, and enrolment
 * says so, where it would otherwise fail later for a reason that points elsewhere (a credential
 * refused, a signer not trusted). It proves nothing about who wrote the token: the fleet server
 * and the signer keys do that.
 */
import { createHash } from 'node:crypto';
import type { TokenFile } from '../schema/token.js';

/** The check of `token`'s fields other than `check`. */
export function tokenCheck(token: TokenFile): string {
  const { check: _check, ...fields } = token;
  return createHash('sha256').update(canonical(fields)).digest('hex').slice(0, 16);
}

/** JSON with every map's keys sorted, so that the check does not depend on the order the file lists them in. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
