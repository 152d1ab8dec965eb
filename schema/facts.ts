/**
 * Facts: what a host observes about itself that templates may read as `facts.*`. Only what
 * does not churn (no addresses, no load): a fact that changes on its own would change the
 * rendered declaration, and the node would apply something nobody committed. The report
 * carries the facts a pass rendered with, so `plan` renders with exactly those.
 */
import * as z from 'zod';

export const Facts = z.strictObject({
  hostname: z.string(),
  /** os-release ID, e.g. debian. */
  os: z.string(),
  /** os-release VERSION_ID, e.g. 12. */
  osVersion: z.string(),
  arch: z.string(),
  cpus: z.number().int().positive(),
  memoryMb: z.number().int().positive(),
});

export type Facts = z.infer<typeof Facts>;

/** What `validate` renders with where no report exists: one value of the right type per fact. */
export const PLACEHOLDER_FACTS: Facts = { hostname: 'placeholder-host', os: 'debian', osVersion: '12', arch: 'x64', cpus: 2, memoryMb: 2048 };
