/**
 * The claim word of a chunk of reports handed to the verify threads (verify-pool.ts): an Int32Array
 * of one element on shared memory, 0 while nobody has the chunk. Every thread is given every chunk;
 * whoever claims it first verifies it. Apart from verify-pool.ts so that the verify thread's bundle
 * (verify-worker.ts) holds only this and the signature code.
 */
export const BY_THREAD = 1;
export const BY_CALLER = 2;

/** Take the chunk for `by`; false when someone has it already. */
export function claim(word: Int32Array, by: typeof BY_THREAD | typeof BY_CALLER): boolean {
  return Atomics.compareExchange(word, 0, 0, by) === 0;
}
