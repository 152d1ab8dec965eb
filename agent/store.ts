/**
 * The store as most of the host opens it: store-core.ts with the schemas of store-checks.ts
 * bound, so that `Store.open` validates whatever it must. `apply --bundle` uses
 * `Store.openLoading` instead, which loads the schemas only when a store needs them.
 */
import { storeChecks } from './store-checks.js';
import { bindStoreChecks } from './store-core.js';

bindStoreChecks(storeChecks);

export { emptyStore, Store, type StoreData } from './store-core.js';
