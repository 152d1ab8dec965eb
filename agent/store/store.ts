/**
 * The store as most of the host opens it: store/core.ts with the schemas of store/checks.ts,
 * so that it validates whatever it must. `apply --bundle` uses `Store.openLoading` instead,
 * which loads the schemas only when a store needs them.
 */
import type { Faults } from '../fault.js';
import { storeChecks } from './checks.js';
import { Store } from './core.js';

export { emptyStore, Store, type StoreData } from './core.js';

/** Open the store at `path`, validating whatever is not exactly as this host last wrote it. */
export function openStore(path: string, faults?: Faults): Store {
  return Store.open(path, storeChecks, faults);
}
