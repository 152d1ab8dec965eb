/**
 * Parsing a node's declaration (see declaration.ts): find where the node sits under nodes/ and
 * render its declaration from its levels (render-with.ts). Kept apart so that a pass answered
 * from a declaration cache does not load the YAML parser or the template engine; and the
 * schemas come from `schemas`, so that a declaration the quick checks answer for loads no zod.
 */
import { findNode } from '../fleet/layout.js';
import { digestOf, type DeclarationResult, type FleetReader, type LoadOptions, type ParseDeclaration } from './declaration.js';
import { renderWith } from './render-with.js';
import type { LoadSchemas } from './schemas.js';

/** The parser: find `node` in `tree` (or take `opts.place`) and render its declaration with `opts.facts`; a node that is not in the tree has an empty declaration. */
export function parserWith(schemas: LoadSchemas): ParseDeclaration {
  return async (tree: FleetReader, node: string, opts: LoadOptions): Promise<DeclarationResult> => {
    const place = opts.place ?? (await findNode(tree, node, opts.hint));
    if (!place) return { ok: true, declaration: { node, files: [], resources: [], digest: digestOf([]) } };
    return renderWith(tree, place, opts.facts, {}, schemas);
  };
}
