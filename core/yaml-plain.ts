/**
 * A fast path for the YAML that declarations are mostly written in: block maps and block
 * sequences of plain, single-quoted and one-line double-quoted scalars, with comments, and the
 * empty `[]` and `{}` (mesh.yaml's `signers: []`). It goes straight to plain objects, without
 * `yaml`'s CST and document (most of a cold declaration's load, and its garbage). Anything else
 * (other flow collections, block scalars, anchors, tags, multi-line scalars, numbers other than
 * small integers, quoted keys, tabs, duplicate keys, anything it is not sure of) is answered
 * with `undefined`, and load.ts parses the text with `yaml` as before. When it answers, the
 * value is what `yaml`'s toJS gives for the same text (test/yaml-plain.test.ts compares the two
 * on generated documents).
 */

/** Thrown inside the parser to give up; caught by parsePlainYaml. */
const GIVE_UP = Symbol('give up');

interface Line {
  indent: number;
  /** The line from its indent on (never empty, never a comment). */
  text: string;
}

const KEY = /^([A-Za-z_][A-Za-z0-9_.\/-]*):(?: +|$)/;
/** Keys yaml would read as something other than their own text. */
const SPECIAL_KEYS = new Set(['true', 'True', 'TRUE', 'false', 'False', 'FALSE', 'null', 'Null', 'NULL', '__proto__']);
/** A plain scalar may not start with these (YAML's indicators, digits and signs: numbers other than small integers are left to yaml). */
const PLAIN_START = /^[^-?:,[\]{}#&*!|>'"%@`+.~0-9\s]/;
const DQ_ESCAPES = /\\(?:[^"\\/bfnrtu]|u(?![0-9a-fA-F]{4})|u[dD][89a-fA-F])/;

/** `text` as plain data, as `yaml` reads it (an empty document is null), or undefined when this path does not handle it. */
export function parsePlainYaml(text: string): unknown {
  if (text.includes('\t') || text.includes('\r') || text.charCodeAt(0) === 0xfeff) return undefined;
  const lines: Line[] = [];
  for (const raw of text.split('\n')) {
    let indent = 0;
    while (raw.charCodeAt(indent) === 32) indent++;
    if (indent === raw.length || raw.charCodeAt(indent) === 35 /* # */) continue;
    if (indent === 0 && (raw.startsWith('---') || raw.startsWith('...') || raw.startsWith('%'))) return undefined;
    lines.push({ indent, text: raw.slice(indent) });
  }
  if (lines.length === 0) return null;
  if (lines[0]!.indent !== 0) return undefined;
  try {
    const at = { i: 0 };
    const value = block(lines, at, 0);
    if (at.i !== lines.length) return undefined;
    return value;
  } catch (e) {
    if (e === GIVE_UP) return undefined;
    throw e;
  }
}

function isItem(text: string): boolean {
  return text.charCodeAt(0) === 45 /* - */ && (text.length === 1 || text.charCodeAt(1) === 32);
}

/** The block (a map or a sequence) whose first line is lines[at.i], at `indent`. */
function block(lines: Line[], at: { i: number }, indent: number): unknown {
  return isItem(lines[at.i]!.text) ? sequence(lines, at, indent) : map(lines, at, indent);
}

function map(lines: Line[], at: { i: number }, indent: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  while (at.i < lines.length) {
    const line = lines[at.i]!;
    if (line.indent < indent) break;
    if (line.indent > indent || isItem(line.text)) throw GIVE_UP;
    const m = KEY.exec(line.text);
    if (!m) throw GIVE_UP;
    const key = m[1]!;
    if (key.length > 200 || SPECIAL_KEYS.has(key) || Object.hasOwn(out, key)) throw GIVE_UP;
    out[key] = value(lines, at, indent, line.text.slice(m[0].length), true);
  }
  return out;
}

function sequence(lines: Line[], at: { i: number }, indent: number): unknown[] {
  const out: unknown[] = [];
  while (at.i < lines.length) {
    const line = lines[at.i]!;
    if (line.indent < indent) break;
    if (line.indent > indent || !isItem(line.text)) {
      // A sequence that is a map's value at the map's own indent ends where the map's next key starts.
      if (line.indent === indent && !isItem(line.text)) break;
      throw GIVE_UP;
    }
    let spaces = 1;
    while (line.text.charCodeAt(spaces) === 32) spaces++;
    const rest = line.text.slice(spaces);
    if (rest === '' || rest.startsWith('#')) {
      out.push(value(lines, at, indent, '', false));
      continue;
    }
    if (isItem(rest) || KEY.test(rest)) {
      // A compact block inside the item: the rest of the line is its first line, at its own column.
      lines[at.i] = { indent: indent + spaces, text: rest };
      out.push(block(lines, at, indent + spaces));
      continue;
    }
    out.push(value(lines, at, indent, rest, false));
  }
  return out;
}

/**
 * The value after `key:` or `- ` on lines[at.i] (`rest`, the line after the indicator), moving
 * past it. Empty: the block on the next lines, more indented (or, for a map's key, a sequence at
 * the same indent), else null.
 */
function value(lines: Line[], at: { i: number }, indent: number, rest: string, ofKey: boolean): unknown {
  at.i++;
  const next = lines[at.i];
  if (rest === '' || rest.startsWith('#')) {
    if (next && next.indent > indent) return block(lines, at, next.indent);
    if (next && ofKey && next.indent === indent && isItem(next.text)) return sequence(lines, at, indent);
    return null;
  }
  // A scalar's line may not be followed by deeper lines (a multi-line scalar, or an error).
  if (next && next.indent > indent) throw GIVE_UP;
  return scalar(rest);
}

function scalar(text: string): unknown {
  const first = text.charCodeAt(0);
  // An empty flow sequence or map (`signers: []`), and nothing else of the flow style.
  if (first === 91 /* [ */ || first === 123 /* { */) {
    if (text.charCodeAt(1) !== first + 2 /* ] or } */) throw GIVE_UP;
    after(text.slice(2));
    return first === 91 ? [] : {};
  }
  if (first === 34 /* " */) {
    let end = 1;
    while (end < text.length && text.charCodeAt(end) !== 34) end += text.charCodeAt(end) === 92 /* \ */ ? 2 : 1;
    if (end >= text.length) throw GIVE_UP;
    const body = text.slice(0, end + 1);
    if (DQ_ESCAPES.test(body) || /[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]/.test(body)) throw GIVE_UP;
    after(text.slice(end + 1));
    return JSON.parse(body) as string;
  }
  if (first === 39 /* ' */) {
    let end = 1;
    for (;;) {
      end = text.indexOf("'", end);
      if (end < 0) throw GIVE_UP;
      if (text.charCodeAt(end + 1) !== 39) break;
      end += 2;
    }
    const body = text.slice(1, end);
    if (/[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]/.test(body)) throw GIVE_UP;
    after(text.slice(end + 1));
    return body.replaceAll("''", "'");
  }
  const hash = text.indexOf(' #');
  const plain = (hash >= 0 ? text.slice(0, hash) : text).trimEnd();
  if (!PLAIN_START.test(plain) || plain.includes(': ') || plain.endsWith(':') || /[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]/.test(plain)) {
    if (/^[0-9]{1,15}$/.test(plain)) return Number(plain);
    throw GIVE_UP;
  }
  switch (plain) {
    case 'true': case 'True': case 'TRUE': return true;
    case 'false': case 'False': case 'FALSE': return false;
    case 'null': case 'Null': case 'NULL': return null;
  }
  return plain;
}

/** What may follow a quoted scalar on its line: nothing, or a comment. */
function after(rest: string): void {
  if (rest === '' || /^ +(#.*)?$/.test(rest)) return;
  throw GIVE_UP;
}
