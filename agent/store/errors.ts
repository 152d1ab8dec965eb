/** The two ways reading the store stops: it cannot be read (a person must act), or it must be validated first. */
import { MeshError } from '../../core/errors.js';

/** Thrown instead of validating when no checks were given: the caller loads them and opens again. */
export class ChecksNeeded extends Error {
  constructor(readonly where: string) {
    super(`${where} must be validated, and the store's schemas are not loaded`);
  }
}

/** The error for a store that exists but cannot be read: the host changes nothing until a person acts. */
export function corrupt(path: string, why: string): MeshError {
  return new MeshError(
    'E_STORE_UNREADABLE',
    `the store ${path} cannot be read (${why}). mesh-host will not change anything until a person looks: ` +
      `restore the file from backup, or move it away and re-enrol so the owned set is recovered from the last report`,
    { next: 'human', data: { path } },
  );
}
