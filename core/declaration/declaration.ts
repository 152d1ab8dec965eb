/**
 * What a node's declaration is, and loading one: the declaration files from nodes/ down to the
 * node's folder, outermost first, rendered with its variables and facts, roles included in
 * place (parse.ts, render.ts). All problems are collected, each with file, line and column;
 * nothing is applied unless there are none. A reader that keeps a cache may answer without
 * parsing, so the parser is asked for only when there is parsing to do.
 */
import { createHash } from 'node:crypto';
import type { Resource } from '../../schema/declaration.js';
import type { ReportedFacts } from '../../schema/facts.js';
import type { Problem } from '../errors.js';
import type { NodePlace } from '../fleet/layout.js';

/** Read access to one commit of the fleet repo (git objects, a folder, or a checkout). */
export interface TreeReader {
  /** Names of the files directly in `dir` (repo-relative, no trailing slash); null when `dir` does not exist. */
  list(dir: string): Promise<string[] | null>;
  /** Text of the file at `path`; null when it does not exist. */
  read(path: string): Promise<string | null>;
  /** Names of the folders directly in `dir`; empty when there are none. */
  folders(dir: string): Promise<string[]>;
  /** Optional cache: `node`'s declaration as loaded earlier, with the same `key` (the facts), from files that still read the same, or null. */
  cached?(node: string, key: string): Promise<Declaration | null>;
  /** Optional cache: keep `declaration`, loaded from what was read since `cached` answered null. */
  remember?(declaration: Declaration, key: string): void;
}

/** The reader the renderer needs: files and folders of one fleet commit. */
export type FleetReader = TreeReader;

/** What a declaration is rendered with, besides the tree. */
export interface LoadOptions {
  /** The facts templates read: the host's own, the ones a node last reported, or placeholders. */
  facts: ReportedFacts;
  /** Where the node sits, when the caller knows (a bundle, a layout already read); found otherwise. */
  place?: NodePlace;
  /** Where the node sat last time: looked at first. */
  hint?: string;
}

export interface Declaration {
  node: string;
  /** Repo-relative files that make up the declaration, roles included. */
  files: string[];
  resources: Resource[];
  /** sha256 over the resolved resources: equal digests mean the same declaration. */
  digest: string;
  /** Ids of the resources whose rendering read a fact. */
  readFacts?: string[];
  /** For each resource whose rendering read a secret, the secrets' names: it shows only as "changed (sensitive)", and the host renders it with their values at apply time. */
  readSecrets?: Record<string, string[]>;
  /** Literal bodies that look like templates (validate shows them). */
  warnings?: Problem[];
}

export type DeclarationResult = { ok: true; declaration: Declaration } | { ok: false; problems: Problem[]; files: string[] };

/** Find, render and validate `node`'s declaration from `tree` (parse.ts). */
export type ParseDeclaration = (tree: TreeReader, node: string, opts: LoadOptions) => Promise<DeclarationResult>;

/** Folder of `node`'s declaration in the fleet repo. */
export function nodeDir(node: string): string {
  return `nodes/${node}`;
}

/** Load, render and validate `node`'s declaration, asking `parser` for the parser only when the reader's cache does not answer. A node not in the tree has an empty declaration. */
export async function loadDeclarationWith(tree: TreeReader, node: string, opts: LoadOptions, parser: () => Promise<ParseDeclaration>): Promise<DeclarationResult> {
  // Parsing is most of a no-op pass: a reader that keeps a cache may answer without it. The facts are part of the key.
  const key = JSON.stringify([opts.facts, opts.place ?? null]);
  const hit = await tree.cached?.(node, key);
  if (hit) return { ok: true, declaration: hit };
  const result = await (await parser())(tree, node, opts);
  if (result.ok) tree.remember?.(result.declaration, key);
  return result;
}

/** Stable digest of a resolved declaration. */
export function digestOf(resources: Resource[]): string {
  return 'sha256:' + createHash('sha256').update(JSON.stringify(resources)).digest('hex');
}
