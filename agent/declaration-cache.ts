/**
 * A cache of the last declaration loaded from a bundle, for `apply --bundle`: parsing and
 * validating the YAML is most of the cost of a pass that changes nothing. The cache keeps the
 * resolved declaration with a hash of every answer the folder gave while it was loaded (each
 * list and each read, in order). Loading is a pure function of those answers, so when the
 * folder gives the same answers again, to the same host build, the result is the same. A cache
 * file that is missing, torn or from another build is a miss, never an error.
 */
import { createHash } from 'node:crypto';
import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Declaration, TreeReader } from '../core/declaration/declaration.js';
import { HOST_VERSION } from '../core/version.js';

interface Answer {
  op: 'list' | 'read' | 'folders';
  path: string;
  hash: string;
}

interface CacheFile {
  build: string;
  node: string;
  /** What the declaration was rendered with besides the files (the facts). */
  key: string;
  answers: Answer[];
  declaration: Declaration;
}

/** `tree`, with a cache of the declaration loaded from it kept in the file `path`. */
export function withDeclarationCache(tree: TreeReader, path: string): TreeReader {
  const build = buildId();
  let answers: Answer[] | null = null; // what the folder answers after a miss, for remember()
  const note = <T>(op: Answer['op'], p: string, value: T): T => {
    answers?.push({ op, path: p, hash: hashOf(value) });
    return value;
  };
  return {
    list: async (p) => note('list', p, await tree.list(p)),
    read: async (p) => note('read', p, await tree.read(p)),
    folders: async (p) => note('folders', p, await tree.folders(p)),
    async cached(node, key) {
      const file = readCache(path);
      if (file && file.build === build && file.node === node && file.key === key && (await sameAnswers(tree, file.answers))) return file.declaration;
      answers = [];
      return null;
    },
    remember(declaration, key) {
      if (answers === null) return;
      const file: CacheFile = { build, node: declaration.node, key, answers, declaration };
      answers = null;
      try {
        writeFileSync(`${path}.tmp`, JSON.stringify(file));
        renameSync(`${path}.tmp`, path); // no fsync: a cache lost in a crash is only a miss
      } catch {
        // a cache that cannot be written costs only time
      }
    },
  };
}

async function sameAnswers(tree: TreeReader, answers: Answer[]): Promise<boolean> {
  for (const a of answers) {
    const value = a.op === 'list' ? await tree.list(a.path) : a.op === 'folders' ? await tree.folders(a.path) : await tree.read(a.path);
    if (hashOf(value) !== a.hash) return false;
  }
  return true;
}

function readCache(path: string): CacheFile | null {
  try {
    const file = JSON.parse(readFileSync(path, 'utf8')) as CacheFile;
    return Array.isArray(file.answers) && typeof file.declaration?.digest === 'string' ? file : null;
  } catch {
    return null;
  }
}

function hashOf(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('base64');
}

/** This host's version and the identity of the file it runs from: a rebuilt host never trusts an older cache. */
function buildId(): string {
  try {
    const st = statSync(fileURLToPath(import.meta.url));
    return `${HOST_VERSION}:${st.size}:${st.mtimeMs}:${st.ino}`;
  } catch {
    return `${HOST_VERSION}:${Math.random()}`; // unknown: never match
  }
}
