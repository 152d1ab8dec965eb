/**
 * Loading a node's declaration with the parser at hand: for the programs that parse anyway
 * (mesh-cli, enrolment, the self-test). The host's passes use `loadDeclarationWith` and a
 * parser that main.ts loads only when a cached declaration does not answer.
 */
import { loadDeclarationWith, type DeclarationResult, type LoadOptions, type TreeReader } from './declaration.js';
import { parseDeclaration } from './parse.js';

export { digestOf, loadDeclarationWith, nodeDir, type Declaration, type DeclarationResult, type FleetReader, type LoadOptions, type ParseDeclaration, type TreeReader } from './declaration.js';

/** Load, render and validate `node`'s declaration. A node not in the tree has an empty declaration. */
export function loadDeclaration(tree: TreeReader, node: string, opts: LoadOptions): Promise<DeclarationResult> {
  return loadDeclarationWith(tree, node, opts, async () => parseDeclaration);
}
