/**
 * Variables: `vars.yaml` at nodes/, in each group folder and in each node folder. A map of
 * names to any YAML value; the closer level replaces a whole top-level key, and `null` unsets it.
 */
import * as z from 'zod';
import { VAR_NAME } from './var-name.js';

/** A variable name as templates read it (`{{ vars.NAME }}`). */
export { VAR_NAME };

export const VarsFile = z.record(
  z.string().regex(VAR_NAME, { message: 'a variable name is letters, digits and _ (not starting with a digit), as templates read it: {{ vars.NAME }}' }),
  z.unknown(),
);

export type VarsFile = z.infer<typeof VarsFile>;
