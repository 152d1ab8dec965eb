/**
 * A node's rendered declaration (render-with.ts) with the schemas at hand: for the programs that
 * load them anyway (mesh-cli, the host's secrets at apply time, the tests).
 */
import type { ReportedFacts } from '../../schema/facts.js';
import type { NodePlace } from '../fleet/layout.js';
import type { FleetReader } from './declaration.js';
import { renderWith, type RenderResult } from './render-with.js';
import { schemas } from './schemas.js';

export { MAX_INCLUDE_DEPTH, type RenderedDeclaration, type RenderResult } from './render-with.js';

/** Render `place`'s declaration from `tree` with `facts`; `revealed` (the host, at apply time) gives secrets their values instead of their stand-ins. */
export function renderDeclaration(tree: FleetReader, place: NodePlace, facts: ReportedFacts, revealed: Record<string, string> = {}): Promise<RenderResult> {
  return renderWith(tree, place, facts, revealed, async () => schemas);
}
