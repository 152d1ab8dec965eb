/**
 * A node's pushed commits read with git, for core/access/rules.ts's refusedNodePush: by
 * `mesh-cli hook` inside another git server, and by `serve` for its own pre-receive hook. Both
 * run while the push sits in git's quarantine; `env` carries its GIT_OBJECT_DIRECTORY and
 * GIT_ALTERNATE_OBJECT_DIRECTORIES when the caller is not git's child itself. "New" means not
 * reachable from a ref the node can see (main, its own branch): against every ref, git 2.39's
 * rev-list takes ~2 CPU-seconds at 10,000 report branches (docs/scale.md, session 10).
 */
import type { PushReader } from '../../core/access/rules.js';
import { reportRef, STATUS_FILE } from '../../core/report/branch.js';
import { git } from '../git.js';

/** The reader of `node`'s push into the bare repository `dir`. */
export function gitPushReader(dir: string, node: string, env?: NodeJS.ProcessEnv): PushReader {
  const run = (args: string[]) => git(dir, ['--git-dir', dir, ...args], '', env);
  return {
    newCommits: async (tip) => (await run(['rev-list', tip, '--not', '--ignore-missing', 'HEAD', reportRef(node)])).split('\n').filter(Boolean),
    files: async (commit) => (await run(['ls-tree', '-r', '-l', '-z', commit])).split('\0').filter(Boolean).map((entry) => {
      const tab = entry.indexOf('\t');
      const size = entry.slice(0, tab).trim().split(/\s+/)[3];
      return { path: entry.slice(tab + 1), size: size === '-' ? 0 : Number(size) };
    }),
    statusJson: (commit) => run(['cat-file', 'blob', `${commit}:${STATUS_FILE}`]).catch(() => null),
  };
}
