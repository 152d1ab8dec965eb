/**
 * Loading a node's declaration from a fleet commit: every .yaml under nodes/<node>/ except
 * node.yaml, in file-name order, with role includes resolved from the same commit and
 * `source` files read from next to the declaration. All problems are collected, each with
 * file, line and column; nothing is applied unless there are none.
 */
import { createHash } from 'node:crypto';
import { DeclarationFile, RoleFile, resourceId, type Resource } from '../schema/declaration.js';
import { loadYaml, positionIn } from '../schema/load.js';
import type { Problem } from './errors.js';

/** Read access to one commit of the fleet repo (git objects, a folder, or a checkout). */
export interface TreeReader {
  /** Names of the files directly in `dir` (repo-relative, no trailing slash); null when `dir` does not exist. */
  list(dir: string): Promise<string[] | null>;
  /** Text of the file at `path`; null when it does not exist. */
  read(path: string): Promise<string | null>;
  /** Optional cache: `node`'s declaration as loaded earlier from files that still read the same, or null. */
  cached?(node: string): Promise<Declaration | null>;
  /** Optional cache: keep `declaration`, loaded from what was read since `cached` answered null. */
  remember?(declaration: Declaration): void;
}

export interface Declaration {
  node: string;
  /** Repo-relative files that make up the declaration, roles included. */
  files: string[];
  resources: Resource[];
  /** sha256 over the resolved resources: equal digests mean the same declaration. */
  digest: string;
}

export type DeclarationResult = { ok: true; declaration: Declaration } | { ok: false; problems: Problem[]; files: string[] };

/** Folder of `node`'s declaration in the fleet repo. */
export function nodeDir(node: string): string {
  return `nodes/${node}`;
}

/** Load, validate and resolve `node`'s declaration. A missing folder is an empty declaration. */
export async function loadDeclaration(tree: TreeReader, node: string): Promise<DeclarationResult> {
  // Parsing is most of a no-op pass: a reader that keeps a cache may answer without it.
  const hit = await tree.cached?.(node);
  if (hit) return { ok: true, declaration: hit };
  const result = await parseDeclaration(tree, node);
  if (result.ok) tree.remember?.(result.declaration);
  return result;
}

async function parseDeclaration(tree: TreeReader, node: string): Promise<DeclarationResult> {
  const dir = nodeDir(node);
  const names = ((await tree.list(dir)) ?? []).filter((n) => /\.ya?ml$/.test(n) && n !== 'node.yaml').sort();
  const problems: Problem[] = [];
  const files: string[] = [];
  const placed: Array<{ resource: Resource; file: string; text: string; path: (string | number)[] }> = [];

  for (const name of names) {
    const file = `${dir}/${name}`;
    files.push(file);
    const text = (await tree.read(file)) ?? '';
    const loaded = loadYaml(text, file, DeclarationFile);
    if (!loaded.ok) {
      problems.push(...loaded.problems);
      continue;
    }
    for (const role of loaded.value.include ?? []) {
      files.push(role);
      const roleText = await tree.read(role);
      if (roleText === null) {
        problems.push({ file, ...positionIn(text, ['include', loaded.value.include!.indexOf(role)]), message: `include ${role} does not exist at this commit` });
        continue;
      }
      const roleLoaded = loadYaml(roleText, role, RoleFile);
      if (!roleLoaded.ok) problems.push(...roleLoaded.problems);
      else roleLoaded.value.resources.forEach((resource, i) => placed.push({ resource, file: role, text: roleText, path: ['resources', i] }));
    }
    loaded.value.resources.forEach((resource, i) => placed.push({ resource, file, text, path: ['resources', i] }));
  }

  problems.push(...duplicates(placed));
  for (const p of placed) {
    if (p.resource.type === 'file' && p.resource.source !== undefined) {
      const source = await resolveSource(tree, dir, p.resource.source);
      if (source === null) problems.push({ file: p.file, ...positionIn(p.text, [...p.path, 'source']), message: `source ${p.resource.source} does not exist next to the declaration (${dir}/)` });
      else p.resource = { ...p.resource, source: undefined, content: source };
    }
  }
  if (problems.length > 0) return { ok: false, problems, files };
  const resources = placed.map((p) => stripUndefined(p.resource));
  return { ok: true, declaration: { node, files, resources, digest: digestOf(resources) } };
}

function duplicates(placed: Array<{ resource: Resource; file: string; text: string; path: (string | number)[] }>): Problem[] {
  // Positions are looked up only for duplicates: positionIn parses the whole file each time.
  const seen = new Map<string, (typeof placed)[number]>();
  const problems: Problem[] = [];
  for (const p of placed) {
    const id = resourceId(p.resource);
    const first = seen.get(id);
    if (first) problems.push({ file: p.file, ...positionIn(p.text, p.path), message: `${id} is declared twice (first in ${first.file}:${positionIn(first.text, first.path).line}); each resource may be declared once` });
    else seen.set(id, p);
  }
  return problems;
}

async function resolveSource(tree: TreeReader, dir: string, source: string): Promise<string | null> {
  if (source.startsWith('/') || source.split('/').includes('..')) return null;
  return tree.read(`${dir}/${source}`);
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** Stable digest of a resolved declaration. */
export function digestOf(resources: Resource[]): string {
  return 'sha256:' + createHash('sha256').update(JSON.stringify(resources)).digest('hex');
}
