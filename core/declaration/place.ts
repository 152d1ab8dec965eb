/**
 * Where a template's text sits in its YAML file, so that a template error inside a value is
 * reported at the file's own line and column. Plain and quoted scalars keep their lines in
 * order; a block scalar (`|`, `>`) starts on the line after its header, at its indentation.
 * Escapes inside double quotes are not accounted for (the column may be off by their length).
 */
import type { LineCounter, Node } from 'yaml';
import { yaml } from '../load.js';
import type { PlaceOf } from './template.js';

/** The PlaceOf of the scalar `node` of the YAML text `source` (1:1 of the file when it is no scalar). */
export function placeOfScalar(source: string, node: Node | null | undefined, lines: LineCounter): PlaceOf {
  const { isScalar, Scalar } = yaml();
  if (!isScalar(node) || !node.range) return () => ({ line: 1, col: 1 });
  const [start, end] = node.range;
  const first = lines.linePos(start);
  const text = source.slice(start, end);
  const sourceLines = text.split('\n');
  if (node.type === Scalar.BLOCK_LITERAL || node.type === Scalar.BLOCK_FOLDED) {
    const body = sourceLines.slice(1);
    const indent = Math.min(...body.filter((l) => l.trim() !== '').map((l) => l.length - l.trimStart().length), Infinity);
    const pad = Number.isFinite(indent) ? indent : 0;
    return (line, col) => ({ line: first.line + line, col: pad + col });
  }
  const quote = node.type === Scalar.QUOTE_DOUBLE || node.type === Scalar.QUOTE_SINGLE ? 1 : 0;
  return (line, col) => {
    if (line === 1) return { line: first.line, col: first.col + quote + col - 1 };
    const at = sourceLines[line - 1] ?? '';
    return { line: first.line + line - 1, col: at.length - at.trimStart().length + col };
  };
}
