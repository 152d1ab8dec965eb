/**
 * The reveal stage of a pass (between load and observe): a declaration that reads no secret is
 * applied as loaded; one that does has those resources rendered again with their values
 * (secrets/host.ts, loaded only then).
 */
import type { Declaration, LoadOptions, TreeReader } from '../../core/declaration/declaration.js';
import { resourceId } from '../../schema/resource-id.js';
import { hostPaths } from '../paths.js';
import type { ResourceContext } from '../resources/handler.js';
import type { Revealed } from './host.js';

/** `declaration`'s resources as a pass applies them, with the lines of those it cannot, and the values it opened. */
export async function revealSecrets(ctx: ResourceContext, tree: TreeReader, node: string, opts: LoadOptions, declaration: Declaration): Promise<Revealed> {
  const sensitive = Object.keys(declaration.readSecrets ?? {});
  if (sensitive.length === 0) return { resources: declaration.resources, failed: [], values: [] };
  if (!ctx.load.secrets) {
    const failed = sensitive.map((id) => ({ id, result: 'failed' as const, error: 'this program cannot decrypt secrets' }));
    return { resources: declaration.resources.filter((r) => !sensitive.includes(resourceId(r))), failed, values: [] };
  }
  const { reveal } = await ctx.load.secrets();
  return reveal(hostPaths(ctx.root), tree, node, opts, declaration);
}
