/**
 * A host's secrets, loaded only by a pass that needs them (main.ts hands this module in as a
 * loader: the age library is a tenth of a second to load). Two jobs:
 *
 * - the node's age identity: made at enrolment, and by the first pass of a host enrolled
 *   before secrets existed, beside the node key (0600, written atomically);
 * - revealing: the declaration a pass loads renders every secret as its stand-in, the same
 *   declaration mesh-cli plans, reports and caches. At apply time the resources that read a
 *   secret are rendered again with the values this node's identity opens; a resource that reads
 *   a secret the node cannot open fails, and nothing else of it is applied.
 */
import type { Resource } from '../../schema/declaration.js';
import { resourceId } from '../../schema/resource-id.js';
import type { ResourceResult } from '../../schema/report.js';
import type { Declaration, LoadOptions, TreeReader } from '../../core/declaration/declaration.js';
import { renderDeclaration } from '../../core/declaration/render.js';
import { findNode, type NodePlace } from '../../core/fleet/layout.js';
import { decryptWith, identityFileText, newIdentity, parseIdentityFile } from '../../core/secrets/age.js';
import { nodeSecrets, type PlacedSecret } from '../../core/secrets/levels.js';
import { remedy } from '../../core/secrets/recipients.js';
import { placed as problemText } from '../../core/errors.js';
import { writeFileAtomic } from '../atomic.js';
import type { HostPaths } from '../paths.js';
import { markSensitive } from '../store/seal.js';
import { readIdentity } from './identity.js';
import { masked } from '../resources/program-output.js';

/** What a pass loads this module for (main.ts's loader). */
export interface HostSecrets {
  ensureIdentity(paths: HostPaths, now: Date): Promise<string>;
  reveal(paths: HostPaths, tree: TreeReader, node: string, opts: LoadOptions, declaration: Declaration): Promise<Revealed>;
}

/** What a pass applies once its secrets are revealed. */
export interface Revealed {
  /** The declared resources in order, those that read a secret rendered with its value (and marked sensitive); the failed ones left out. */
  resources: Resource[];
  /** One failed line per resource that reads a secret this node cannot open. */
  failed: ResourceResult[];
  /** Every value this node opened at its levels: command output is masked for each. */
  values: string[];
}

/** The node's recipient, making its identity first when it has none (a host enrolled before secrets existed). */
export async function ensureIdentity(paths: HostPaths, now: Date): Promise<string> {
  const existing = readIdentity(paths);
  if (existing?.recipient) return existing.recipient;
  if (existing) {
    const parsed = (await parseIdentityFile(`${existing.identity}\n`))!;
    writeIdentity(paths, parsed, now); // with its public key line, which the report reads
    return parsed.recipient;
  }
  const id = await newIdentity();
  writeIdentity(paths, id, now);
  return id.recipient;
}

/**
 * Resource `id` rendered with the values of its own secrets (`names`) and the stand-ins of the
 * rest, when a render with every value failed: a value can make what its stand-in did not (a
 * password that is no hash), and only the resources that read it fail then. A failure says where
 * and why, with every value masked.
 */
async function withOwnValues(tree: TreeReader, place: NodePlace, opts: LoadOptions, values: Record<string, string>, names: string[], id: string): Promise<{ resource?: Resource; why?: string }> {
  const own = Object.fromEntries(names.map((n) => [n, values[n]!]));
  const rendered = await renderDeclaration(tree, place, opts.facts, own);
  if (!rendered.ok) return { why: masked(rendered.problems.map(problemText).join('; '), Object.values(values)) };
  return { resource: rendered.declaration.resources.find((r) => resourceId(r) === id) };
}

/** A new identity for this node (enrolment), not written yet. */
export { newIdentity };

/** Write `id` as the node's identity file. */
export function writeIdentity(paths: HostPaths, id: { identity: string; recipient: string }, now: Date): void {
  writeFileAtomic(paths.ageIdentity, identityFileText(id, now), 0o600);
}

/** The message of a resource that reads secret `name` (`placed`: as this node's levels hold it) when the node cannot open it. */
export function notForThisNode(name: string, placed: PlacedSecret | undefined): string {
  return `secret ${name} is not encrypted to this node; ${placed ? remedy(placed) : 'run mesh-cli secret rekey'}`;
}

/** `declaration` (stand-ins) with the resources that read a secret rendered with their values. */
export async function reveal(paths: HostPaths, tree: TreeReader, node: string, opts: LoadOptions, declaration: Declaration): Promise<Revealed> {
  const sensitive = declaration.readSecrets ?? {};
  const place = opts.place ?? (await findNode(tree, node, opts.hint));
  const identity = readIdentity(paths)?.identity ?? null;
  const values: Record<string, string> = {};
  const secrets = place === null ? new Map<string, PlacedSecret>() : (await nodeSecrets((p) => tree.read(p), place)).secrets;
  if (identity !== null) {
    for (const [name, placed] of secrets) {
      const value = await decryptWith(identity, placed.entry.value).catch(() => null);
      if (value !== null) values[name] = value;
    }
  }
  const all = place === null ? null : await renderDeclaration(tree, place, opts.facts, values);
  const byId = new Map(all?.ok ? all.declaration.resources.map((r) => [resourceId(r), r]) : []);
  const resources: Resource[] = [];
  const failed: ResourceResult[] = [];
  for (const r of declaration.resources) {
    const id = resourceId(r);
    const names = sensitive[id];
    if (!names) {
      resources.push(r);
      continue;
    }
    const closed = names.filter((n) => !Object.hasOwn(values, n));
    if (closed.length > 0) {
      failed.push({ id, result: 'failed', error: closed.map((name) => notForThisNode(name, secrets.get(name))).join('; ') });
      continue;
    }
    const { resource: real, why } = all?.ok || place === null ? { resource: byId.get(id) } : await withOwnValues(tree, place, opts, values, names, id);
    if (real === undefined) failed.push({ id, result: 'failed', error: `its secrets could not be rendered with their values${why ? `: ${why}` : ''}` });
    else resources.push(markSensitive({ ...real }));
  }
  return { resources, failed, values: Object.values(values) };
}
