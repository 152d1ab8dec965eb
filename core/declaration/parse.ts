/**
 * Parsing a node's declaration (see declaration.ts): find where the node sits under nodes/ and
 * render its declaration from its levels (render.ts). Kept apart so that a pass answered from a
 * declaration cache does not load the YAML parser, the template engine or the schemas.
 */
import { findNode } from '../fleet/layout.js';
import { digestOf, type DeclarationResult, type FleetReader, type LoadOptions } from './declaration.js';
import { renderDeclaration } from './render.js';

/** Find `node` in `tree` (or take `opts.place`) and render its declaration with `opts.facts`; a node that is not in the tree has an empty declaration. */
export async function parseDeclaration(tree: FleetReader, node: string, opts: LoadOptions): Promise<DeclarationResult> {
  const place = opts.place ?? (await findNode(tree, node, opts.hint));
  if (!place) return { ok: true, declaration: { node, files: [], resources: [], digest: digestOf([]) } };
  return renderDeclaration(tree, place, opts.facts);
}

