/**
 * Rendering a declaration's templates: Liquid (LiquidJS) with strict variables and filters and
 * a lenient `if`, so `| default:` and `{% if %}` work on an unset variable while any other
 * unknown name or filter is an error at the template's file:line:column. A value that is a list
 * or a map cannot be printed as it is (Liquid would print "[object Object]"): it is an error
 * that names the filters that do print it. Rendering happens once: the values of variables,
 * parameters and facts are data, never parsed as templates themselves.
 */
import type * as LiquidJs from 'liquidjs';
import type { Liquid } from 'liquidjs';
import type { Problem } from '../errors.js';
import { PLACEHOLDER_FACTS } from '../../schema/facts.js';
import { VAR_NAME } from '../../schema/var-name.js';

/** What a template sees. */
export interface TemplateScope {
  vars: Record<string, unknown>;
  node: { name: string; groups: string[] };
  facts: Record<string, unknown>;
  /** Inside a role: the `with:` of the include that brought it in. */
  params?: Record<string, unknown>;
  /** Secrets at the node's levels: their stand-ins (core/secrets/placeholder.ts), or on the host at apply time their values. */
  secrets?: Record<string, string>;
}

/** The names at the top of a scope a template may read. */
export type ScopeName = keyof TemplateScope;

/** Maps a position inside the template text (1-based) to its place in the file. */
export type PlaceOf = (line: number, col: number) => { line: number; col: number };

/** `secrets`: the names of the secrets it read, when it read any. */
export type Rendered = { ok: true; text: string; reads: ScopeName[]; secrets?: string[] } | { ok: false; problem: Problem };

/**
 * LiquidJS, loaded when a first template is rendered (a plain `require`, resolved into the bundle
 * by esbuild, which keeps it packed: scripts/build.mjs): most passes render none.
 */
let liquidjs: typeof LiquidJs | undefined;

/** The Liquid engine, made when a first template is rendered: building it costs ~15 ms, and most passes render none. */
let built: Liquid | undefined;
const engine = (): Liquid => (built ??= new (liquidjs ??= require('liquidjs') as typeof LiquidJs).Liquid({
  strictVariables: true,
  strictFilters: true,
  lenientIf: true,
  ownPropertyOnly: true,
  outputEscape: (value: unknown) => {
    if (value !== null && typeof value === 'object') {
      throw new Error(`this value is a ${Array.isArray(value) ? 'list' : 'map'} and cannot be printed as it is; print it with a filter such as | join: ", " or | json`);
    }
    return value === undefined || value === null ? '' : String(value);
  },
}));

/** Whether `text` holds any Liquid markup (`{{` or `{%`): only such text is rendered. */
export function isTemplate(text: string): boolean {
  return text.includes('{{') || text.includes('{%');
}

/** Render `text` (from `file`, placed by `placeOf`) with `scope`; an error is one Problem at its place. */
export function renderTemplate(source: string, scope: TemplateScope, file: string, placeOf: PlaceOf): Rendered {
  try {
    const template = engine().parse(source);
    const text = engine().renderSync(template, { ...scope }) as string;
    const reads = engine().globalVariablesSync(template).filter((n): n is ScopeName => n in scope);
    const secrets = reads.includes('secrets') ? secretNames(template) : [];
    return { ok: true, text, reads: [...new Set(reads)].sort(), ...(secrets.length > 0 ? { secrets } : {}) };
  } catch (e) {
    return { ok: false, problem: problemOf(e, scope, file, placeOf) };
  }
}

/** The names of the secrets a template reads (`secrets.NAME`), found without rendering: every branch counts. */
function secretNames(template: ReturnType<Liquid['parse']>): string[] {
  const names = engine().globalVariableSegmentsSync(template).filter((s) => s[0] === 'secrets').map((s) => String(s[1] ?? '*'));
  return [...new Set(names)].sort();
}

function problemOf(e: unknown, scope: TemplateScope, file: string, placeOf: PlaceOf): Problem {
  const raw = e instanceof Error ? e.message : String(e);
  // LiquidJS ends its messages with ", line:L, col:C" of the template; the place goes first in ours.
  const at = /, line:(\d+), col:(\d+)$/.exec(raw);
  const [line, col] = at ? [Number(at[1]), Number(at[2])] : liquidjs && e instanceof liquidjs.LiquidError && e.token ? e.token.getPosition() : [1, 1];
  const message = (at ? raw.slice(0, at.index) : raw).replace(/^undefined variable: /, 'unknown variable ');
  return { file, ...placeOf(line!, col!), message: hint(message, scope) };
}

/** Jinja's filters (Ansible's and Salt's templates) by their Liquid names. */
const JINJA_FILTERS: Readonly<Record<string, string>> = {
  upper: 'upcase', lower: 'downcase', title: 'capitalize', capitalize: 'capitalize', int: 'to_integer', length: 'size', count: 'size',
  to_json: 'json', tojson: 'json', to_nice_json: 'json', trim: 'strip', unique: 'uniq', d: 'default', b64encode: 'base64_encode', b64decode: 'base64_decode',
};

/** The message with what to do about it. */
function hint(message: string, scope: TemplateScope): string {
  const filter = /^undefined filter: (\w+)$/.exec(message)?.[1];
  if (filter !== undefined && JINJA_FILTERS[filter]) return `${message}: templates are Liquid, not Jinja: write | ${JINJA_FILTERS[filter]}`;
  if (message === 'expected ":" after filter name') return `${message}: templates are Liquid, not Jinja: a filter's arguments follow a colon (| default: 80, | join: ", "), not brackets`;
  const m = /^unknown variable (\w+)\.(.+)$/.exec(message);
  const name = m?.[2]?.split('.')[0] ?? '';
  if (m && ['vars', 'params', 'secrets'].includes(m[1]!) && !VAR_NAME.test(name)) {
    return `${message}: '${name}' cannot be a name of ${m[1]} (letters, digits and _, not starting with a digit; Liquid reads a - in it as part of the name): name it ${name.replace(/[^A-Za-z0-9_]/g, '_').replace(/^(?=[0-9])/, '_')} here and where it is set`;
  }
  if (m?.[1] === 'vars') return `${message}: set it in a vars.yaml (nodes/, the node's groups or the node), or give a fallback with | default: VALUE`;
  if (m?.[1] === 'params') return `${message}: pass it in the include's with:, or give a fallback with | default: VALUE`;
  if (m?.[1] === 'secrets') return `${message}: set it with 'mesh-cli secret set ${m[2]} --level PATH' (a secrets.yaml at nodes/, one of the node's groups or the node)`;
  if (m?.[1] === 'facts' && Object.hasOwn(PLACEHOLDER_FACTS, name)) {
    return `${message}: the node's last report carries no fact ${name} (its host is older than this mesh-cli); plan it after the host upgrades, or give a fallback with | default: VALUE`;
  }
  if (m?.[1] === 'facts') return `${message}: the facts are ${Object.keys(scope.facts).sort().join(', ') || 'none'}`;
  const bare = /^unknown variable (\w+)$/.exec(message)?.[1];
  if (bare === undefined) return message;
  // A name as Ansible's and Salt's templates write it (`{{ port }}`): the level that holds it.
  const holders = Object.entries(scope).filter(([, values]) => typeof values === 'object' && values !== null && Object.hasOwn(values, bare)).map(([level]) => `${level}.${bare}`);
  return `${message}: a template reads ${Object.keys(scope).join(', ')}${holders.length ? `; write ${holders.join(' or ')}` : ''}`;
}
