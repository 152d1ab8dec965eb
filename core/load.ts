/**
 * Loading a YAML (or JSON) file against a zod schema, returning every problem with its
 * file, line and column: YAML syntax errors, duplicate keys, unknown fields and wrong
 * values alike. JSON is YAML 1.2, so reports and token files use the same loader.
 */
import type * as Yaml from 'yaml';
import type { Document, LineCounter, Node } from 'yaml';
import type * as z from 'zod';
import { InvalidInputError, type Problem } from './errors.js';
import { parsePlainYaml } from './yaml-plain.js';

let yamlLibrary: typeof Yaml | undefined;

/**
 * The `yaml` library, loaded on first use. Most files take the fast path to plain data
 * (yaml-plain.ts), so a host's pass whose files all do never loads it: inflating, compiling and
 * evaluating it was ~25 ms of every cold pass (scripts/build.mjs keeps it packed in the bundle).
 * A plain `require`, which esbuild resolves into the bundle and vitest provides; both the
 * `import` and the `require` of 'yaml' are its one CommonJS build, so its nodes are the same
 * whichever way they were made.
 */
export function yaml(): typeof Yaml {
  return (yamlLibrary ??= require('yaml') as typeof Yaml);
}

export type Loaded<T> = { ok: true; value: T } | { ok: false; problems: Problem[] };

/** Largest file any loader accepts; bigger input is refused before it is parsed. */
export const MAX_FILE_BYTES = 1024 * 1024;

/** The parsed document a `prepare` step works on: its source, nodes and positions. */
export interface Parsed {
  file: string;
  source: string;
  doc: Document;
  lines: LineCounter;
}

/** A step between parsing and the schema check (rendering templates): new data, or problems. */
export type Prepare = (data: unknown, parsed: Parsed) => { data: unknown; problems: Problem[] };

/** Parse `text` (named `file` in messages), run `prepare` on the data if given, and check it against `schema`. Never throws on bad input. */
export function loadYaml<S extends z.ZodType>(text: string, file: string, schema: S, prepare?: Prepare): Loaded<z.output<S>> {
  const read = readYaml(text, file, prepare);
  return read.ok ? checkYaml(read.data, read.parsed, schema) : read;
}

/** The first half of loadYaml: `text` parsed (and prepared) to plain data, or its problems; `checkYaml` is the second. */
export function readYaml(text: string, file: string, prepare?: Prepare): { ok: true; data: unknown; parsed: Parsed } | { ok: false; problems: Problem[] } {
  if (Buffer.byteLength(text) > MAX_FILE_BYTES) {
    return { ok: false, problems: [{ file, line: 1, col: 1, message: `file is larger than ${MAX_FILE_BYTES} bytes; split it` }] };
  }
  // Most files take the fast path to plain data (yaml-plain.ts); the document, with its positions, is built only when something must be placed.
  const plain = text.includes('\uFFFD') ? undefined : parsePlainYaml(text);
  let parsed: Parsed;
  let data: unknown;
  if (plain !== undefined) {
    let full: { doc: Document; lines: LineCounter } | undefined;
    const document = () => (full ??= parse(text));
    parsed = { file, source: text, get doc() { return document().doc; }, get lines() { return document().lines; } };
    data = plain ?? {};
  } else {
    const { doc, lines } = parse(text);
    parsed = { file, source: text, doc, lines };
    // Bytes that are not UTF-8 reach here as U+FFFD: said at their place, never written on as replacement characters.
    const broken = text.indexOf('\uFFFD');
    if (broken >= 0) {
      const at = lines.linePos(broken);
      return { ok: false, problems: [{ file, line: at.line, col: at.col, message: `${file} is not UTF-8 text here (a byte that is not UTF-8, or U+FFFD): save it as UTF-8; mesh writes text files only, so binary content belongs in a package` }] };
    }
    const syntax = [...doc.errors, ...doc.warnings].map((e) => {
      const at = lines.linePos(e.pos[0]);
      const message = e.code === 'DUPLICATE_KEY' ? `duplicate key (${e.message.split('\n')[0]})` : e.message.split('\n')[0]!;
      return { file, line: at.line, col: at.col, message };
    });
    if (syntax.length > 0) return { ok: false, problems: syntax };
    try {
      data = doc.toJS({ maxAliasCount: 100 }) ?? {};
    } catch (e) {
      // Unresolved aliases and alias bombs surface only when the document is built.
      return { ok: false, problems: [{ file, line: 1, col: 1, message: `cannot read the YAML: ${e instanceof Error ? e.message : String(e)}` }] };
    }
  }
  if (prepare) {
    const prepared = prepare(data, parsed);
    if (prepared.problems.length > 0) return { ok: false, problems: prepared.problems };
    data = prepared.data;
  }
  return { ok: true, data, parsed };
}

/**
 * The second half of loadYaml: `data` read by readYaml checked against `schema`, each problem placed
 * in the file; an issue `deferred` says is left to a later check (the data is then still not loaded).
 */
export function checkYaml<S extends z.ZodType>(data: unknown, parsed: Parsed, schema: S, deferred?: (issue: z.core.$ZodIssue) => boolean, hints?: Hints): Loaded<z.output<S>> {
  const result = schema.safeParse(data);
  if (result.success) return { ok: true, value: result.data };
  const issues = deferred ? result.error.issues.filter((issue) => !deferred(issue)) : result.error.issues;
  const problems = issues.flatMap((issue) => problemsOf(issue, parsed.doc, parsed.lines, parsed.file, hints));
  return { ok: false, problems: problems.sort((a, b) => a.line - b.line || a.col - b.col) };
}

function parse(text: string): { doc: Document; lines: LineCounter } {
  const { LineCounter, parseDocument } = yaml();
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false, strict: true });
  return { doc, lines };
}

/** Like loadYaml, but throws an InvalidInputError naming `what`, and `todo` (what to do about it) when given. */
export function loadYamlOrThrow<S extends z.ZodType>(text: string, file: string, schema: S, what = file, todo?: string): z.output<S> {
  const loaded = loadYaml(text, file, schema);
  if (!loaded.ok) throw new InvalidInputError(what, loaded.problems, todo);
  return loaded.value;
}

/** What to write instead, where a schema knows more than the loader (undefined: nothing to add). */
export interface Hints {
  /** For the unknown field `key` of the map at `path`. */
  unknownField?(path: (string | number)[], key: string): string | undefined;
  /** The field that names a map whose discriminator is `option` (a resource of type file: path). */
  identityField?(option: string): string | undefined;
  /** For the value `value` at `path` that names none of its options (a resource's `type`, an `ensure:`). */
  unknownOption?(path: (string | number)[], value: string): string | undefined;
}

function problemsOf(issue: z.core.$ZodIssue, doc: Document, lines: LineCounter, file: string, hints?: Hints): Problem[] {
  const { isScalar } = yaml();
  const path = issue.path.filter((k): k is string | number => typeof k !== 'symbol');
  const where = (node: Node | null | undefined) => positionOf(node ?? nearest(doc, path), lines);
  const field = path.length > 0 ? `${path.join('.')}: ` : '';
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => {
      const instead = hints?.unknownField?.(path, key);
      return { file, ...where(keyNode(doc, path, key)), message: `${field}unknown field '${key}'${instead ? `: ${instead}` : ''}` };
    });
  }
  if (issue.code === 'invalid_union' && 'discriminator' in issue && issue.discriminator) {
    const node = doc.getIn(path, true) as Node | undefined;
    const instead = isScalar(node) ? hints?.unknownOption?.(path, String(node.value)) : undefined;
    const value = isScalar(node) ? `unknown ${issue.discriminator} '${String(node.value)}'` : `missing field '${issue.discriminator}'`;
    return [{ file, ...where(node), message: `${field}${value}${expected(issue)}${instead ? `: ${instead}` : ''}${node === undefined ? asKey(issue, doc.getIn(path.slice(0, -1), true) as Node | undefined, hints) : ''}` }];
  }
  if (issue.code === 'invalid_key' && path.length > 0) {
    // A map key that breaks the rule: point at the key, with the rule's own message.
    const key = String(path[path.length - 1]);
    const inner = (issue as { issues?: Array<{ message: string }> }).issues?.[0]?.message ?? issue.message;
    const parent = path.slice(0, -1);
    return [{ file, ...where(keyNode(doc, parent, key)), message: `${parent.length > 0 ? `${parent.join('.')}: ` : ''}'${key}': ${inner}` }];
  }
  if (issue.code === 'invalid_type' && doc.getIn(path, true) === undefined) {
    return [{ file, ...where(undefined), message: `${field}missing required field` }];
  }
  if (issue.code === 'invalid_type' && issue.message.startsWith('Invalid input')) {
    // zod's own words only: a schema's message of its own (mode, version) says it better.
    const shape = wrongShape(issue.expected, (path.length === 0 ? doc.contents : doc.getIn(path, true)) as Node | null);
    if (shape) return [{ file, ...where(undefined), message: `${field}${shape}` }];
  }
  if (issue.code === 'invalid_value') {
    const node = doc.getIn(path, true) as Node | undefined;
    const instead = isScalar(node) && node.value !== null ? hints?.unknownOption?.(path, String(node.value)) : undefined;
    if (instead) return [{ file, ...where(node), message: `${field}${issue.message}: ${instead}` }];
  }
  return [{ file, ...where(undefined), message: `${field}${issue.message}` }];
}

/**
 * A map missing its discriminator that holds one of its values as a key, as Ansible and Salt write
 * it (`- file: /etc/motd` for `- type: file` and `path: /etc/motd`): what to write instead.
 */
function asKey(issue: z.core.$ZodIssue & { discriminator?: string }, map: Node | undefined, hints?: Hints): string {
  const { isMap, isPair, isScalar } = yaml();
  const options = (issue as { options?: unknown[] }).options;
  if (!isMap(map) || !Array.isArray(options)) return '';
  const pair = map.items.find((p) => isPair(p) && isScalar(p.key) && options.includes(p.key.value));
  if (!pair || !isScalar(pair.key)) return '';
  const key = String(pair.key.value);
  const value = isScalar(pair.value) && pair.value.value !== null ? String(pair.value.value) : null;
  const named = value === null ? undefined : (hints?.identityField?.(key) ?? (value.startsWith('/') ? 'path' : 'name'));
  const field = value === null ? '' : `, and give ${value} its own field (${named}: ${value})`;
  return `; '${key}:' is a ${issue.discriminator}, not a field: write '${issue.discriminator}: ${key}'${field}`;
}

/** A list given one value, a map given a list, a yes for a boolean, a quoted number: how to write what was meant (undefined: another mistake). */
function wrongShape(expected: string, node: Node | null): string | undefined {
  const { isMap, isScalar, isSeq } = yaml();
  if (expected === 'array' && isMap(node)) return "must be a list: start each item with '- ', even when there is one";
  if (isScalar(node) && typeof node.value === 'string') {
    const quoted = node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE';
    if (expected === 'boolean' && /^(yes|no|on|off|y|n|true|false)$/i.test(node.value)) return `must be true or false, ${quoted ? 'without quotes' : `not ${node.value} (YAML 1.2 reads it as a word)`}`;
    if (expected === 'number' && /^\s*-?\d+(\.\d+)?\s*$/.test(node.value)) return `must be a number: write ${node.value.trim()} without quotes`;
  }
  if (expected === 'string' && isScalar(node) && (typeof node.value === 'number' || typeof node.value === 'boolean')) {
    const written = String(node.source ?? node.value);
    return `must be a string: YAML reads ${written} as a ${typeof node.value}; quote it ("${written}") if you meant the text`;
  }
  if (expected === 'array' && isScalar(node) && node.value !== null && typeof node.value !== 'object') {
    const value = String(node.value);
    return `must be a list, even of one: write [${value}], or '- ${value}' on a line of its own below`;
  }
  if (expected === 'object' && isSeq(node)) return "must be a map of fields (name: value lines), not a list (lines starting with '- ')";
  return undefined;
}

function expected(issue: z.core.$ZodIssue): string {
  const options = (issue as { options?: unknown[] }).options;
  return Array.isArray(options) && options.length > 0 ? ` (expected one of: ${options.join(', ')})` : '';
}

function keyNode(doc: Document, path: (string | number)[], key: string): Node | undefined {
  const { isMap, isPair, isScalar } = yaml();
  const map = path.length === 0 ? doc.contents : doc.getIn(path, true);
  if (!isMap(map)) return undefined;
  const pair = map.items.find((p) => isPair(p) && isScalar(p.key) && p.key.value === key);
  return pair && isScalar(pair.key) ? pair.key : undefined;
}

/** The deepest node along `path` that exists (a missing field points at its parent). */
function nearest(doc: Document, path: (string | number)[]): Node | undefined {
  for (let n = path.length; n >= 0; n--) {
    const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    if (node && typeof node === 'object' && 'range' in node) return node as Node;
  }
  return undefined;
}

function positionOf(node: Node | undefined, lines: LineCounter): { line: number; col: number } {
  const offset = node?.range?.[0];
  return offset === undefined ? { line: 1, col: 1 } : lines.linePos(offset);
}

/** Line and column of the node at `path` in YAML `text` (1:1 when it cannot be found). */
export function positionIn(text: string, path: (string | number)[]): { line: number; col: number } {
  const { LineCounter, parseDocument } = yaml();
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines });
  return positionOf(doc.getIn(path, true) as Node | undefined, lines);
}

/** Line and column of the key `key` of the map at `path` in YAML `text` (the map's place, or 1:1, when there is no such key). */
export function keyPositionIn(text: string, path: (string | number)[], key: string): { line: number; col: number } {
  const { LineCounter, parseDocument } = yaml();
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines });
  return positionOf(keyNode(doc, path, key) ?? nearest(doc, path), lines);
}
