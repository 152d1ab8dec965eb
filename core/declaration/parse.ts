/**
 * Parsing and validating a node's declaration (see declaration.ts): YAML with positions, the
 * schemas, role includes, `source` files and duplicate identities. Kept apart so that a pass
 * answered from a declaration cache does not load the parser or build the schemas.
 */
import { DeclarationFile, RoleFile, type Resource } from '../../schema/declaration.js';
import { resourceId } from '../../schema/resource-id.js';
import { loadYaml, positionIn } from '../load.js';
import { digestOf, nodeDir, type DeclarationResult, type TreeReader } from './declaration.js';
import type { Problem } from '../errors.js';

/** Load, validate and resolve `node`'s declaration from `tree`, collecting every problem. */
export async function parseDeclaration(tree: TreeReader, node: string): Promise<DeclarationResult> {
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
    for (const include of loaded.value.include ?? []) {
      const role = typeof include === 'string' ? include : include.role;
      files.push(role);
      const roleText = await tree.read(role);
      if (roleText === null) {
        problems.push({ file, ...positionIn(text, ['include', loaded.value.include!.indexOf(include)]), message: `include ${role} does not exist at this commit` });
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
