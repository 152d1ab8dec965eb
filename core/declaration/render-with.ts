/**
 * A node's rendered declaration: the one function the host, `validate` and `plan` share, so all
 * three compute the same resources from the same inputs. Its stages:
 *
 * 1. **Levels**: nodes/, each group folder down to the node's own (core/fleet/layout.ts).
 * 2. **Variables and secrets**: each level's vars.yaml and secrets.yaml, the closer level
 *    replacing whole keys (vars.ts, core/secrets/levels.ts). A secret renders as its stand-in
 *    (core/secrets/placeholder.ts) unless the host hands in its value at apply time, and may be
 *    read only in a body with `template: true`.
 * 3. **Files**: each level's declaration files in file-name order, outermost level first.
 * 4. **Render and check each file**: its includes expanded in place (roles with parameters,
 *    roles that include roles), short fields always rendered, bodies only with `template: true`
 *    (template.ts), rendered values converted to their field's type, then the schema check, so
 *    every problem is at the file's own line and column.
 * 5. **Identity**: a resource id declared twice is one resource when both render identically,
 *    and an error naming both places when they differ.
 * 6. **Triggers**: a command's `onChange` names only resources declared before it.
 *
 * Every problem is collected; a declaration with any problem applies nothing.
 */
import type { Node } from 'yaml';
import type { ReportedFacts } from '../../schema/facts.js';
import type { Include, Resource } from '../../schema/declaration.js';
import { fastDeclarationFile } from '../../schema/declaration-fast.js';
import { FOREIGN_ENSURE, FOREIGN_FIELDS, FOREIGN_TYPES } from '../../schema/foreign-fields.js';
import { ROLE_PATH } from '../../schema/role-path.js';
import { PATH_TYPES, resourceId } from '../../schema/resource-id.js';
import type { Problem } from '../errors.js';
import { levelsOf, NOT_DECLARATIONS, type NodePlace } from '../fleet/layout.js';
import { checkYaml, keyPositionIn, loadYaml, positionIn, readYaml, yaml, type Hints, type Parsed } from '../load.js';
import { digestOf, type Declaration, type FleetReader } from './declaration.js';
import { linkProblems } from './links.js';
import { placeOfScalar } from './place.js';
import { isTemplate, renderTemplate, type PlaceOf, type ScopeName, type TemplateScope } from './template.js';
import { varsWith, type LayeredVars } from './vars-levels.js';
import type { LoadSchemas, Schemas } from './schemas.js';
import { placeholders } from '../secrets/placeholder.js';
import { BODIES } from './bodies.js';

const BOOLEAN_FIELDS = new Set(['enabled', 'running', 'system', 'template', 'shell']);
const INTEGER_FIELDS = new Set(['uid', 'gid']);
/** The secrets' file at each level (core/secrets/levels.ts reads it). */
const SECRETS_FILE = 'secrets.yaml';

/** Roles may include roles this deep. */
export const MAX_INCLUDE_DEPTH = 8;

export interface RenderedDeclaration extends Declaration {
  /** Ids of the resources whose rendering read a fact (plan marks them; their result depends on the machine). */
  readFacts: string[];
  /** For each resource whose rendering read a secret, the names of the secrets it read (plan and every diff show it only as sensitive). */
  readSecrets: Record<string, string[]>;
  vars: LayeredVars;
  /** Literal bodies that look like they meant to be templates (`validate` shows them; nothing is refused). */
  warnings: Problem[];
}

export type RenderResult = { ok: true; declaration: RenderedDeclaration } | { ok: false; problems: Problem[]; files: string[] };

interface Placed {
  resource: Resource;
  file: string;
  text: string;
  path: (string | number)[];
}

interface Pass {
  tree: FleetReader;
  schemas: LoadSchemas;
  warnings: Problem[];
  base: Omit<TemplateScope, 'params'>;
  problems: Problem[];
  files: string[];
  placed: Placed[];
  readFacts: Set<number>;
  /** For each placed resource (by index) that read secrets, their names. */
  readSecrets: Map<number, string[]>;
  /** role + its rendered parameters: a role reached twice with the same parameters is included once. */
  included: Set<string>;
}

/**
 * Render `place`'s declaration from `tree` with `facts`; `revealed` (the host, at apply time) gives secrets their values instead of their stand-ins.
 * `schemas` is asked for zod's schemas only when a file needs them: a declaration of plain files and directories, with plain variables and no secrets, does not
 * (render.ts `renderDeclaration` hands them at once).
 */
export async function renderWith(tree: FleetReader, place: NodePlace, facts: ReportedFacts, revealed: Record<string, string>, schemas: LoadSchemas): Promise<RenderResult> {
  const levels = levelsOf(place);
  const { vars, files, problems } = await varsWith((path) => tree.read(path), place, async () => (await schemas()).readVars);
  const found = await secretsOf(tree, place, schemas);
  const secrets = { ...placeholders(found.secrets) };
  for (const name of Object.keys(secrets)) if (Object.hasOwn(revealed, name)) secrets[name] = revealed[name]!;
  const pass: Pass = {
    tree,
    schemas,
    warnings: [],
    base: { vars: vars.values, node: { name: place.node, groups: place.groups }, facts: { ...facts }, secrets },
    problems: [...problems, ...found.problems],
    files: [...files, ...found.files],
    placed: [],
    readFacts: new Set(),
    readSecrets: new Map(),
    included: new Set(),
  };
  for (const level of levels) {
    const names = ((await tree.list(level)) ?? []).filter((n) => /\.ya?ml$/.test(n) && !NOT_DECLARATIONS.has(n)).sort();
    for (const name of names) await renderFile(pass, `${level}/${name}`, null, []);
  }
  const resources = identities(pass);
  checkLinks(pass);
  checkTriggers(pass);
  checkRestartOn(pass);
  if (pass.problems.length > 0) return { ok: false, problems: pass.problems, files: pass.files };
  const readFacts = [...pass.readFacts].map((i) => resourceId(pass.placed[i]!.resource));
  const readSecrets: Record<string, string[]> = {};
  for (const [i, names] of pass.readSecrets) {
    const id = resourceId(pass.placed[i]!.resource);
    readSecrets[id] = [...new Set([...(readSecrets[id] ?? []), ...names])].sort();
  }
  return { ok: true, declaration: { node: place.node, files: pass.files, resources, digest: digestOf(resources), readFacts: [...new Set(readFacts)], readSecrets, vars, warnings: pass.warnings } };
}

/** Render one declaration file (params null) or role (params given), its includes first, in place. */
async function renderFile(pass: Pass, file: string, params: Record<string, unknown> | null, chain: string[], known?: string): Promise<void> {
  pass.files.push(file);
  const text = known ?? (await pass.tree.read(file)) ?? '';
  const scope: TemplateScope = params === null ? pass.base : { ...pass.base, params };
  const reads: Reads[] = [];
  const schema = params === null ? 'DeclarationFile' : 'RoleFile';
  let unrendered = false;
  const loaded = await checked(readYaml(text, file, (data, parsed) => {
    const rendered = renderFields(data, parsed, scope, reads, pass.warnings);
    unrendered = rendered.problems.length > 0;
    return rendered;
  }), schema, pass.schemas);
  if (!loaded.ok) {
    pass.problems.push(...loaded.problems);
    // A template that does not render stops the file before its schema check: what is wrong with the rest, as written
    // (read again: rendering changed the data in place), is said too.
    const raw = unrendered ? readYaml(text, file) : null;
    if (raw?.ok) pass.problems.push(...(await asWritten(raw, schema, pass.schemas)));
    await missingRoles(pass, file, text);
    return;
  }
  const value = loaded.value as { include?: Include[]; resources: Resource[] };
  for (const [k, include] of (value.include ?? []).entries()) await includeRole(pass, file, text, k, include, [...chain, file]);
  const dir = file.slice(0, file.lastIndexOf('/'));
  for (const [i, raw] of value.resources.entries()) {
    const sourceSecrets: string[] = [];
    const resource = await withSource(pass, raw, dir, file, text, i, scope, sourceSecrets);
    if (resource === null) continue;
    if (reads[i]?.scopes.includes('facts')) pass.readFacts.add(pass.placed.length);
    const secretNames = [...(reads[i]?.secrets ?? []), ...sourceSecrets];
    if (secretNames.length > 0) pass.readSecrets.set(pass.placed.length, secretNames);
    pass.placed.push({ resource, file, text, path: ['resources', i] });
  }
}

async function includeRole(pass: Pass, file: string, text: string, k: number, include: Include, chain: string[]): Promise<void> {
  const role = typeof include === 'string' ? include : include.role;
  const given = typeof include === 'string' ? {} : (include.with ?? {});
  const at = (path: (string | number)[]) => ({ file, ...positionIn(text, ['include', k, ...path]) });
  if (chain.includes(role)) {
    pass.problems.push({ ...at([]), message: `include cycle: ${[...chain, role].join(' -> ')}; a role may not include itself, directly or through others` });
    return;
  }
  if (chain.length > MAX_INCLUDE_DEPTH) {
    pass.problems.push({ ...at([]), message: `roles nest more than ${MAX_INCLUDE_DEPTH} deep: ${[...chain, role].join(' -> ')}` });
    return;
  }
  const roleText = await pass.tree.read(role);
  if (roleText === null) {
    pass.problems.push({ ...at([]), message: noRole(role) });
    return;
  }
  const declared = await roleParams(roleText, role, pass.schemas);
  const params: Record<string, unknown> = {};
  const before = pass.problems.length;
  for (const [name, fallback] of Object.entries(declared ?? {})) {
    if (name in given) params[name] = given[name];
    else if (fallback !== null) params[name] = fallback;
    else pass.problems.push({ ...at([]), message: `${role} needs the parameter '${name}': pass it in this include's with:` });
  }
  for (const name of Object.keys(given)) {
    if (declared === null) params[name] = given[name];
    else if (!(name in declared)) pass.problems.push({ file, ...keyPositionIn(text, ['include', k, 'with'], name), message: `${role} takes no parameter '${name}' (it takes: ${Object.keys(declared).join(', ') || 'none'})` });
  }
  if (pass.problems.length > before) return; // rendering the role without its parameters would only repeat the error
  const key = `${role}\0${JSON.stringify(params, Object.keys(params).sort())}`;
  if (pass.included.has(key)) return; // the same role with the same parameters: once
  pass.included.add(key);
  await renderFile(pass, role, params, chain, roleText); // read once: a file is one answer of the tree (the bundle cache counts on it)
}

const noRole = (role: string) => `include ${role} does not exist at this commit`;

/**
 * The includes of a file that did not load (a template or a field of its own is wrong), checked
 * only for a role that is not there, so that a mistyped include is named with the file's other
 * problems: expanding one needs the file's own values, rendered.
 */
async function missingRoles(pass: Pass, file: string, text: string): Promise<void> {
  const read = readYaml(text, file);
  const includes = read.ok ? (read.data as { include?: unknown }).include : undefined;
  if (!Array.isArray(includes)) return;
  for (const [k, include] of includes.entries()) {
    const role: unknown = typeof include === 'string' ? include : (include as { role?: unknown } | null)?.role;
    if (typeof role !== 'string' || !ROLE_PATH.test(role) || role.split('/').includes('..')) continue; // a malformed one is the schema's to name
    if ((await pass.tree.read(role)) === null) pass.problems.push({ file, ...positionIn(text, ['include', k]), message: noRole(role) });
  }
}

/** A file read by readYaml, checked quickly when it is only files and directories, else by its schema (which places every problem). */
async function checked(read: ReturnType<typeof readYaml>, schema: 'DeclarationFile' | 'RoleFile', schemas: LoadSchemas): Promise<{ ok: true; value: unknown } | { ok: false; problems: Problem[] }> {
  if (!read.ok) return read;
  if (Array.isArray(read.data)) return { ok: false, problems: [aList(read.parsed.file, schema)] };
  const quick = fastDeclarationFile(read.data);
  if (quick !== undefined) return { ok: true, value: quick };
  return checkYaml(read.data, read.parsed, (await schemas())[schema], undefined, foreignHints(read.data));
}

/** What FOREIGN_FIELDS and FOREIGN_TYPES say of a declaration's (or role's) `data`: a field of the resource at resources.N, or its type. */
export function foreignHints(data: unknown): Hints {
  return {
    unknownField(path, key) {
      if (path.length !== 2 || path[0] !== 'resources' || typeof path[1] !== 'number') return undefined;
      const type = ((data as { resources?: Array<{ type?: unknown }> }).resources?.[path[1]])?.type;
      return (typeof type === 'string' ? FOREIGN_FIELDS[type]?.[key] : undefined) ?? FOREIGN_FIELDS['*']![key];
    },
    identityField: (type) => (PATH_TYPES.has(type) ? 'path' : 'name'),
    unknownOption(path, value) {
      if (path.length !== 3 || path[0] !== 'resources') return undefined;
      return path[2] === 'type' ? FOREIGN_TYPES[value] : path[2] === 'ensure' ? FOREIGN_ENSURE[value] : undefined;
    },
  };
}

/** The node's secrets (nodeSecrets), without loading their reader when no level has a secrets.yaml; each file is read once. */
async function secretsOf(tree: FleetReader, place: NodePlace, schemas: LoadSchemas): ReturnType<Schemas['nodeSecrets']> {
  const texts = new Map<string, string | null>();
  for (const level of levelsOf(place)) texts.set(`${level}/${SECRETS_FILE}`, await tree.read(`${level}/${SECRETS_FILE}`));
  if ([...texts.values()].every((text) => text === null)) return { secrets: new Map(), files: [], problems: [] };
  return (await schemas()).nodeSecrets(async (path) => (texts.has(path) ? texts.get(path)! : tree.read(path)), place);
}

/** The `params:` a role declares (null: it declares none, and takes what it is given). */
async function roleParams(text: string, file: string, schemas: LoadSchemas): Promise<Record<string, unknown> | null> {
  const loaded = loadYaml(text, file, (await schemas()).RoleFile.pick({ params: true }).loose());
  return loaded.ok ? (loaded.value.params ?? null) : null;
}

/** A `source:` read from next to the file that names it (rendered with `template: true`); null when it is missing. */
async function withSource(pass: Pass, resource: Resource, dir: string, file: string, text: string, i: number, scope: TemplateScope, secrets: string[]): Promise<Resource | null> {
  const { template: _template, ...rest } = resource as Resource & { template?: boolean };
  if (rest.type !== 'file' || rest.source === undefined) return rest as Resource;
  const source = rest.source.startsWith('/') || rest.source.split('/').includes('..') ? null : `${dir}/${rest.source}`;
  const body = source === null ? null : await pass.tree.read(source);
  if (body === null) {
    pass.problems.push({ file, ...positionIn(text, ['resources', i, 'source']), message: `source ${rest.source} does not exist next to ${file} (in ${dir}/)` });
    return null;
  }
  pass.files.push(source!);
  if (body.includes('\uFFFD') || body.includes('\0')) {
    pass.problems.push({ file, ...positionIn(text, ['resources', i, 'source']), message: `source ${rest.source} is not UTF-8 text (a NUL byte or a byte that is not UTF-8): mesh writes text files only, so binary content belongs in a package` });
    return null;
  }
  let content = body;
  if ((resource as { template?: boolean }).template === true && isTemplate(body)) {
    const rendered = renderTemplate(body, scope, source!, (line, col) => ({ line, col }));
    if (!rendered.ok) {
      pass.problems.push(rendered.problem);
      return null;
    }
    content = rendered.text;
    secrets.push(...(rendered.secrets ?? []));
  }
  const { source: _source, ...fields } = rest;
  return { ...fields, content } as Resource;
}

/** What one resource's templates read: the scope names, and the names of the secrets. */
interface Reads {
  scopes: ScopeName[];
  secrets: string[];
}

/** Render the templates in a parsed file's includes and resources, in place, collecting which scope names each resource read. */
function renderFields(data: unknown, parsed: Parsed, scope: TemplateScope, reads: Reads[], warnings: Problem[]): { data: unknown; problems: Problem[] } {
  const problems: Problem[] = [];
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return { data, problems };
  const top = data as Record<string, unknown>;
  /** `body`: a body of a resource with `template: true`, the only place a secret may be read. */
  const render = (value: unknown, path: (string | number)[], sink: Reads, body: boolean): unknown => {
    if (typeof value === 'string') {
      if (!isTemplate(value)) return value;
      // Placed only on an error: the document with positions is then built (readYaml's fast path has none).
      const placeOf: PlaceOf = (line, col) => {
        const node = parsed.doc.getIn(path, true) as Node | undefined;
        return placeOfScalar(parsed.source, yaml().isScalar(node) ? node : undefined, parsed.lines)(line, col);
      };
      const r = renderTemplate(value, scope, parsed.file, placeOf);
      if (!r.ok) {
        problems.push(r.problem);
        return value;
      }
      if (r.secrets && !body) {
        problems.push({ file: parsed.file, ...positionIn(parsed.source, path), message: `secrets.${r.secrets[0]} is read here, but a secret may be read only in a body (content, source, run, unless, onlyif, environment, password) of a resource with template: true, so that it never shows in an id, a plan line or a report` });
        return value;
      }
      sink.scopes.push(...r.reads);
      sink.secrets.push(...(r.secrets ?? []));
      return convert(r.text, path, parsed, problems);
    }
    if (Array.isArray(value)) return value.map((v, i) => render(v, [...path, i], sink, body));
    if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, render(v, [...path, k], sink, body)]));
    return value;
  };
  if (Array.isArray(top.include)) top.include = top.include.map((inc, k) => (inc !== null && typeof inc === 'object' && 'with' in inc ? { ...inc, with: render((inc as { with: unknown }).with, ['include', k, 'with'], { scopes: [], secrets: [] }, false) } : inc));
  if (Array.isArray(top.resources)) {
    top.resources = top.resources.map((resource, i) => {
      const sink: Reads = { scopes: [], secrets: [] };
      reads[i] = sink;
      if (resource === null || typeof resource !== 'object' || Array.isArray(resource)) return resource;
      const fields = resource as Record<string, unknown>;
      const bodiesToo = fields.template === true;
      for (const body of BODIES) if (!bodiesToo && fields[body] !== undefined) warnLiteral(fields[body], parsed, ['resources', i, body], warnings);
      // Copied only when a field renders to something else: most resources have no template at all.
      let out: Record<string, unknown> | undefined;
      for (const k of Object.keys(fields)) {
        const v = fields[k];
        if (k === 'type' || (BODIES.has(k) && !bodiesToo) || (typeof v === 'string' && !isTemplate(v))) continue;
        const rendered = render(v, ['resources', i, k], sink, BODIES.has(k));
        if (rendered !== v) (out ??= { ...fields })[k] = rendered;
      }
      return out ?? fields;
    });
  }
  return { data: top, problems };
}

/** A file that holds a list of tasks, as an Ansible playbook does, where a map is wanted. */
function aList(file: string, schema: 'DeclarationFile' | 'RoleFile'): Problem {
  return { file, line: 1, col: 1, message: `a ${schema === 'RoleFile' ? 'role' : 'declaration'} is a map, not a list: write resources: on a line of its own above the list, and indent the list under it (roles go under include:)` };
}

/** The kinds of a schema's issue that are about a value's form (a pattern, a type, one of a set, a length), which its rendering decides. */
const RENDERED_FORM: ReadonlySet<string> = new Set(['invalid_format', 'invalid_type', 'invalid_value', 'too_big', 'too_small']);

/** The problems of a file's shape as written, leaving the form of each value a template makes to its rendering. */
export async function asWritten({ data, parsed }: { data: unknown; parsed: Parsed }, schema: 'DeclarationFile' | 'RoleFile', schemas: LoadSchemas): Promise<Problem[]> {
  if (Array.isArray(data)) return [aList(parsed.file, schema)];
  const rendered = (issue: { code: string; path: PropertyKey[] }) => RENDERED_FORM.has(issue.code) && rendersFirst(data, issue.path);
  const loaded = checkYaml(data, parsed, (await schemas())[schema], rendered, foreignHints(data));
  return loaded.ok ? [] : loaded.problems;
}

/**
 * Whether the value at `path` of a declaration or role file, as read, is a template that rendering
 * replaces before the schema sees it: a field of a resource (a body only with `template: true`), or
 * a value an include passes in `with:`. A role checked on its own (`mesh-cli validate`) leaves such
 * a value's form to the render that gives it its parameters, as each node that includes it does.
 */
export function rendersFirst(data: unknown, path: readonly PropertyKey[]): boolean {
  const at = (value: unknown, keys: readonly PropertyKey[]): unknown =>
    keys.reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined), value);
  const value = at(data, path);
  if (typeof value !== 'string' || !isTemplate(value)) return false;
  const [top, , field] = path;
  if (top === 'include') return field === 'with';
  if (top !== 'resources' || typeof field !== 'string' || field === 'type') return false;
  return !BODIES.has(field) || (at(data, path.slice(0, 2)) as { template?: unknown }).template === true;
}

/** A warning when a literal body holds what reads like one of mesh's own template names. */
function warnLiteral(body: unknown, parsed: Parsed, path: (string | number)[], warnings: Problem[]): void {
  if (Array.isArray(body)) return body.forEach((b, k) => warnLiteral(b, parsed, [...path, k], warnings));
  if (body !== null && typeof body === 'object') return Object.entries(body).forEach(([k, b]) => warnLiteral(b, parsed, [...path, k], warnings));
  if (typeof body !== 'string') return;
  const m = /\{\{-?\s*(vars|node|facts|params|secrets)\./.exec(body);
  if (m) warnings.push({ file: parsed.file, ...positionIn(parsed.source, path), message: `this body holds '{{ ${m[1]}.' but is copied literally: add template: true to render it (or leave it, if the braces are the file's own)` });
}

/** A rendered value as its field's type: booleans and integers from their text; everything else stays text. */
function convert(text: string, path: (string | number)[], parsed: Parsed, problems: Problem[]): unknown {
  const field = String(path[path.length - 1]);
  const place = () => ({ file: parsed.file, ...positionIn(parsed.source, path) });
  if (BOOLEAN_FIELDS.has(field)) {
    if (text.trim() === 'true' || text.trim() === 'false') return text.trim() === 'true';
    problems.push({ ...place(), message: `${field} renders to '${text}', which is not true or false` });
  } else if (INTEGER_FIELDS.has(field)) {
    if (/^\s*\d+\s*$/.test(text)) return Number(text);
    problems.push({ ...place(), message: `${field} renders to '${text}', which is not a whole number` });
  } else if (field === 'password' && path.length === 3) {
    // A hash holds no blank space: the line break that `echo` or `openssl passwd` ends a value (a secret set from stdin) with is dropped.
    return text.trim();
  }
  return text;
}

/**
 * The resources in order, one per id: an identical second declaration is dropped, a different one is
 * an error naming both places, and so is a second resource of another type at the same path (a file
 * and a directory both at /srv/app).
 */
function identities(pass: Pass): Resource[] {
  const seen = new Map<string, Placed>();
  const atPath = new Map<string, Placed>();
  const out: Resource[] = [];
  for (const p of pass.placed) {
    const id = resourceId(p.resource);
    const first = seen.get(id);
    if (!first) {
      seen.set(id, p);
      out.push(stripUndefined(p.resource));
      samePath(pass, atPath, p);
      continue;
    }
    if (JSON.stringify(stripUndefined(first.resource)) === JSON.stringify(stripUndefined(p.resource))) continue;
    const there = positionIn(first.text, first.path);
    pass.problems.push({ file: p.file, ...positionIn(p.text, p.path), message: `${id} is declared again here and differently at ${first.file}:${there.line}:${there.col}; declare it once, and vary it with variables` });
  }
  return out;
}

/** A problem at `p` when another resource (of another type: the same id is `identities`' case) was declared at its path first. */
function samePath(pass: Pass, atPath: Map<string, Placed>, p: Placed): void {
  if (!PATH_TYPES.has(p.resource.type) || !('path' in p.resource)) return;
  const first = atPath.get(p.resource.path);
  if (!first) {
    atPath.set(p.resource.path, p);
    return;
  }
  const there = positionIn(first.text, first.path);
  pass.problems.push({
    file: p.file,
    ...positionIn(p.text, [...p.path, 'path']),
    message: `${p.resource.path} is declared here as a ${p.resource.type} and as a ${first.resource.type} at ${first.file}:${there.line}:${there.col}; one path can hold one thing: keep one of them`,
  });
}

/** A path under a declared symlink, at the resource's path field (links.ts); a collision names the other's place. */
function checkLinks(pass: Pass): void {
  const placed = [...firstById(pass).values()];
  for (const problem of linkProblems(placed.map((p) => p.resource))) {
    const p = placed[problem.at]!;
    const other = problem.other === undefined ? undefined : placed[problem.other]!;
    const there = other && positionIn(other.text, other.path);
    pass.problems.push({ file: p.file, ...positionIn(p.text, [...p.path, 'path']), message: problem.message(there ? `${other.file}:${there.line}:${there.col}` : '') });
  }
}

/**
 * A warning (nothing is refused) for each path in a service's `restartOn` or `reloadOn` that no
 * resource declares: a service restarts (reloads) when a pass changes a file it declares, so such a
 * path never restarts it (a file a package installs is not watched; Puppet refuses a subscribe to
 * an undeclared resource).
 */
function checkRestartOn(pass: Pass): void {
  const declared = new Set(pass.placed.flatMap((p) => (PATH_TYPES.has(p.resource.type) && 'path' in p.resource ? [p.resource.path] : [])));
  for (const p of firstById(pass).values()) {
    const r = p.resource;
    if (r.type !== 'service') continue;
    for (const [field, verb] of [['restartOn', 'restart'], ['reloadOn', 'reload']] as const) {
      for (const [k, path] of (r[field] ?? []).entries()) {
        if (declared.has(path)) continue;
        pass.warnings.push({ file: p.file, ...positionIn(p.text, [...p.path, field, k]), message: `${field} names ${path}, which this node's declaration does not declare: ${r.name} is ${verb}ed only when a pass changes a file it declares, so this never ${verb}s it; declare ${path} (or take it out of ${field})` });
      }
    }
  }
}

/** Each command's `onChange` names a resource declared before it: the trigger must be known when the command's turn comes. */
function checkTriggers(pass: Pass): void {
  const first = firstById(pass);
  const before = new Set<string>();
  for (const p of pass.placed) {
    if (p.resource.type === 'command') {
      for (const [k, watched] of (p.resource.onChange ?? []).entries()) {
        if (before.has(watched)) continue;
        const later = first.get(watched);
        const there = later && positionIn(later.text, later.path);
        pass.problems.push({
          file: p.file,
          ...positionIn(p.text, [...p.path, 'onChange', k]),
          message: later === p
            ? `onChange names ${watched}, this command itself: a command watches the resources whose change should run it`
            : later
              ? `onChange names ${watched}, which is declared after this command (at ${later.file}:${there!.line}:${there!.col}): a command may watch only resources declared before it; move the command below it`
              : `onChange names ${watched}, which this node's declaration does not declare: name a resource declared before this command by its id, such as file:/etc/app/app.ini`,
        });
      }
    }
    before.add(resourceId(p.resource));
  }
}

/** Each resource's first declaration, by id, in declared order (a second one is identical, or already a problem). */
function firstById(pass: Pass): Map<string, Placed> {
  const first = new Map<string, Placed>();
  for (const p of pass.placed) if (!first.has(resourceId(p.resource))) first.set(resourceId(p.resource), p);
  return first;
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
