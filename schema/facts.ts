/**
 * Facts: what a host observes about itself that templates may read as `facts.*`. Only what
 * does not churn (no addresses, no load): a fact that changes on its own would change the
 * rendered declaration, and the node would apply something nobody committed. The report
 * carries the facts a pass rendered with, so `plan` renders with exactly those.
 */
import * as z from 'zod';

/** The facts every host has reported since the first report format: a report must carry these. */
const FIRST_FACTS = {
  hostname: z.string(),
  /** os-release ID, e.g. debian. */
  os: z.string(),
  /** os-release VERSION_ID, e.g. 12. */
  osVersion: z.string(),
  arch: z.string(),
  cpus: z.number().int().positive(),
  memoryMb: z.number().int().positive(),
};

/** Facts a host reports since a later version: a report from an older host lacks them. */
const LATER_FACTS = {
  /** os-release VERSION_CODENAME, e.g. bookworm ("unknown" where os-release has none). */
  osCodename: z.string(),
  /** The first word of os-release ID_LIKE, or ID where it has none: debian for Debian and Ubuntu. */
  osFamily: z.string(),
};

/** The facts a host of this version collects. */
export const Facts = z.strictObject({ ...FIRST_FACTS, ...LATER_FACTS });
export type Facts = z.infer<typeof Facts>;

/**
 * The facts as a report carries them: an older host's report lacks the later facts, and a newer
 * host's may carry facts this version does not know; both are read, and templates see what is there.
 */
export const ReportedFacts = z.looseObject({ ...FIRST_FACTS, ...Object.fromEntries(Object.entries(LATER_FACTS).map(([k, v]) => [k, v.optional()])) });
export type ReportedFacts = z.infer<typeof ReportedFacts>;

/** What `validate` renders with where no report exists: one value of the right type per fact. */
export const PLACEHOLDER_FACTS: Facts = { hostname: 'placeholder-host', os: 'debian', osVersion: '12', osCodename: 'bookworm', osFamily: 'debian', arch: 'x64', cpus: 2, memoryMb: 2048 };
