/**
 * A quick check of a declaration file whose resources are all files and directories (the bulk
 * of most declarations), without zod: it gives exactly what `DeclarationFile` (and `RoleFile`)
 * in declaration.ts give for such a file — new objects, keys in the schema's order — or
 * undefined whenever it is not sure the file is valid, and the schema then checks it and says
 * what is wrong. It imports no schema, so that a pass that needs only it does not load zod.
 * test/declaration-fast.test.ts holds it to the schema. `fastVarsFile` does the same for
 * schema/vars.ts's `VarsFile`.
 */
import { VAR_NAME } from './var-name.js';

const FILE_KEYS = ['type', 'path', 'content', 'source', 'template', 'mode', 'owner', 'group', 'ensure'] as const;
const DIRECTORY_KEYS = ['type', 'path', 'mode', 'owner', 'group', 'ensure'] as const;
const FILE_SET = new Set<string>(FILE_KEYS);
const DIRECTORY_SET = new Set<string>(DIRECTORY_KEYS);
const MODE = /^0?[0-7]{3}$|^[0-7]{4}$/;
const NAME = /^[a-z_][a-z0-9_.+-]*$/i;

/** `{ resources }` checked as the schemas check it, or undefined (ask the schema). */
export function fastDeclarationFile(data: unknown): { resources: unknown[] } | undefined {
  if (!isPlain(data)) return undefined;
  const keys = Object.keys(data);
  if (keys.length !== 1 || keys[0] !== 'resources') return undefined;
  const resources = data.resources;
  if (!Array.isArray(resources)) return undefined;
  const out: unknown[] = new Array(resources.length);
  for (let i = 0; i < resources.length; i++) {
    const r = resources[i] as unknown;
    if (!isPlain(r)) return undefined;
    const checked = r.type === 'file' ? file(r) : r.type === 'directory' ? directory(r) : undefined;
    if (checked === undefined) return undefined;
    out[i] = checked;
  }
  return { resources: out };
}

/** A vars.yaml's data checked as `VarsFile` checks it (every name a variable name), or undefined (ask the schema). */
export function fastVarsFile(data: unknown): Record<string, unknown> | undefined {
  if (!isPlain(data)) return undefined;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(data)) {
    if (key === '__proto__' || !VAR_NAME.test(key)) return undefined;
    out[key] = data[key];
  }
  return out;
}

function file(r: Record<string, unknown>): Record<string, unknown> | undefined {
  for (const key in r) if (!FILE_SET.has(key)) return undefined;
  if (!path(r.path) || !owned(r)) return undefined;
  if ('content' in r && (typeof r.content !== 'string' || r.content.includes('\0'))) return undefined;
  if ('source' in r && (typeof r.source !== 'string' || r.source.length === 0)) return undefined;
  if ('template' in r && typeof r.template !== 'boolean') return undefined;
  if ('content' in r && 'source' in r) return undefined;
  return copy(r, FILE_KEYS);
}

function directory(r: Record<string, unknown>): Record<string, unknown> | undefined {
  for (const key in r) if (!DIRECTORY_SET.has(key)) return undefined;
  if (!path(r.path) || !owned(r)) return undefined;
  return copy(r, DIRECTORY_KEYS);
}

/** mode, owner, group and ensure, each absent or valid. */
function owned(r: Record<string, unknown>): boolean {
  if ('mode' in r && (typeof r.mode !== 'string' || !MODE.test(r.mode))) return false;
  if ('owner' in r && (typeof r.owner !== 'string' || !NAME.test(r.owner))) return false;
  if ('group' in r && (typeof r.group !== 'string' || !NAME.test(r.group))) return false;
  if ('ensure' in r && r.ensure !== 'present' && r.ensure !== 'absent') return false;
  return true;
}

/** An absolute path in its one canonical form (no //, no /./, no trailing /, no .., no NUL). */
function path(p: unknown): boolean {
  if (typeof p !== 'string' || p.length < 2 || p.charCodeAt(0) !== 47) return false;
  if (p.includes('\0') || p.includes('//') || p.endsWith('/')) return false;
  for (const part of p.split('/')) if (part === '.' || part === '..') return false;
  return true;
}

function copy(r: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) if (key in r) out[key] = r[key];
  return out;
}

function isPlain(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}
