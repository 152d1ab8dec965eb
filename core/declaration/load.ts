/**
 * Loading a node's declaration with the parser at hand: for the programs that parse anyway
 * (mesh-cli, enrolment, the self-test). The host's passes use `loadDeclarationWith` and a
 * parser that main.ts loads only when a cached declaration does not answer.
 */
import { loadDeclarationWith, type DeclarationResult, type LoadOptions, type TreeReader } from './declaration.js';
import { parserWith } from './parse.js';
import { schemas } from './schemas.js';

export { digestOf, loadDeclarationWith, nodeDir, type Declaration, type DeclarationResult, type FleetReader, type LoadOptions, type ParseDeclaration, type TreeReader } from './declaration.js';

/** The parser with the schemas at hand (agent/main.ts hands the host's a loader instead: parse.ts). */
export const parseDeclaration = parserWith(async () => schemas);

/** Load, render and validate `node`'s declaration. A node not in the tree has an empty declaration. */
export function loadDeclaration(tree: TreeReader, node: string, opts: LoadOptions): Promise<DeclarationResult> {
  return loadDeclarationWith(tree, node, opts, async () => parseDeclaration);
}
