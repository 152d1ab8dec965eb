/**
 * What a node's declaration is, and loading one: every .yaml under nodes/<node>/ except
 * node.yaml, in file-name order, with role includes resolved from the same commit and `source`
 * files read from next to the declaration (parse.ts). All problems are collected, each with
 * file, line and column; nothing is applied unless there are none. A reader that keeps a cache
 * may answer without parsing, so the parser is asked for only when there is parsing to do.
 */
import { createHash } from 'node:crypto';
import type { Resource } from '../../schema/declaration.js';
import type { Problem } from '../errors.js';

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

/** Parse, validate and resolve `node`'s declaration from `tree` (parse.ts). */
export type ParseDeclaration = (tree: TreeReader, node: string) => Promise<DeclarationResult>;

/** Folder of `node`'s declaration in the fleet repo. */
export function nodeDir(node: string): string {
  return `nodes/${node}`;
}

/** Load, validate and resolve `node`'s declaration, asking `parser` for the parser only when the reader's cache does not answer. A missing folder is an empty declaration. */
export async function loadDeclarationWith(tree: TreeReader, node: string, parser: () => Promise<ParseDeclaration>): Promise<DeclarationResult> {
  // Parsing is most of a no-op pass: a reader that keeps a cache may answer without it.
  const hit = await tree.cached?.(node);
  if (hit) return { ok: true, declaration: hit };
  const result = await (await parser())(tree, node);
  if (result.ok) tree.remember?.(result.declaration);
  return result;
}

/** Stable digest of a resolved declaration. */
export function digestOf(resources: Resource[]): string {
  return 'sha256:' + createHash('sha256').update(JSON.stringify(resources)).digest('hex');
}
