/**
 * Variables: `vars.yaml` at nodes/, in each group folder and in each node folder. A map of
 * names to any YAML value; the closer level replaces a whole top-level key, and `null` unsets it.
 */
import * as z from 'zod';

/** A variable name as templates read it (`{{ vars.NAME }}`). */
export const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const VarsFile = z.record(
  z.string().regex(VAR_NAME, { message: 'a variable name is letters, digits and _ (not starting with a digit), as templates read it: {{ vars.NAME }}' }),
  z.unknown(),
);

export type VarsFile = z.infer<typeof VarsFile>;
