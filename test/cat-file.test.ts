/**
 * mesh-cli's one long-running `git cat-file --batch` (mesh-cli/git.ts): objects come back in the
 * order asked, a missing one as null, and a blob over the reader's cap is passed over as it
 * streams by (no content kept) without losing its place in the stream. And core/git/tree.ts
 * reads a raw tree as `git ls-tree` lists it, under SHA-1 and SHA-256.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isFileMode, treeEntries } from '../core/git/tree.js';
import { catFileBatch } from '../mesh-cli/git.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();

function repoWith(blobs: Buffer[]): { dir: string; oids: string[] } {
  const dir = tmp('mesh-catfile-');
  execFileSync('git', ['init', '--quiet', '--bare', dir]);
  const oids = blobs.map((b) => execFileSync('git', ['--git-dir', dir, 'hash-object', '-w', '--stdin'], { input: b }).toString().trim());
  return { dir, oids };
}

describe('catFileBatch', () => {
  it('passes over a blob larger than maxBlob and reads what follows it intact', async () => {
    const small = Buffer.from('{"small":true}\n');
    // Several pipe reads long, so that the pass-over spans chunk boundaries.
    const big = Buffer.alloc(3 * 1024 * 1024 + 17, 'x');
    const after = Buffer.from('after the big one');
    const { dir, oids } = repoWith([small, big, after]);
    const batch = catFileBatch(dir, [`--git-dir=${dir}`], { maxBlob: 1024 * 1024 });
    try {
      const [a, b, c, d] = await batch.read([oids[0]!, oids[1]!, '0'.repeat(40), oids[2]!]);
      expect(a).toMatchObject({ oid: oids[0], type: 'blob', size: small.length });
      expect(a!.data.equals(small)).toBe(true);
      expect(b).toMatchObject({ oid: oids[1], type: 'blob', size: big.length, oversized: true });
      expect(b!.data.length).toBe(0);
      expect(c).toBeNull();
      expect(d!.data.equals(after)).toBe(true);
      // The stream stays in step for the next read.
      const [again] = await batch.read([oids[2]!]);
      expect(again!.data.equals(after)).toBe(true);
    } finally {
      await batch.close();
    }
  });

  it('reads every blob whole without a cap', async () => {
    const big = Buffer.alloc(2 * 1024 * 1024, 'y');
    const { dir, oids } = repoWith([big]);
    const batch = catFileBatch(dir, [`--git-dir=${dir}`]);
    try {
      const [b] = await batch.read(oids);
      expect(b!.oversized).toBeUndefined();
      expect(b!.data.equals(big)).toBe(true);
    } finally {
      await batch.close();
    }
  });

  it('reads through --batch where git is older than --batch-command (2.36)', async () => {
    const { dir, oids } = repoWith([Buffer.from('one'), Buffer.from('two')]);
    // A git that refuses --batch-command as git 2.35 does, and runs the real one otherwise.
    const bin = tmp('mesh-oldgit-');
    const real = execFileSync('sh', ['-c', 'command -v git']).toString().trim();
    writeFileSync(join(bin, 'git'), `#!/bin/sh\ncase " $* " in *" --batch-command "*) echo "error: unknown option \\\`batch-command'" >&2; exit 129;; esac\nexec ${real} "$@"\n`);
    chmodSync(join(bin, 'git'), 0o755);
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path}`;
    try {
      const batch = catFileBatch(dir, [`--git-dir=${dir}`]);
      try {
        const [a, b] = await batch.read(oids);
        expect(a!.data.toString()).toBe('one');
        expect(b!.data.toString()).toBe('two');
        const [again] = await batch.read([oids[1]!]);
        expect(again!.data.toString()).toBe('two');
      } finally {
        await batch.close();
      }
      // Closed before any read, it still ends.
      await catFileBatch(dir, [`--git-dir=${dir}`]).close();
    } finally {
      process.env.PATH = path;
    }
  });
});

describe('treeEntries', () => {
  for (const format of ['sha1', 'sha256']) {
    it(`reads a raw ${format} tree as git ls-tree lists it`, () => {
      const dir = tmp('mesh-tree-');
      execFileSync('git', ['init', '--quiet', '--bare', `--object-format=${format}`, dir]);
      const blob = execFileSync('git', ['--git-dir', dir, 'hash-object', '-w', '--stdin'], { input: 'x' }).toString().trim();
      const sub = execFileSync('git', ['--git-dir', dir, 'mktree'], { input: `100644 blob ${blob}\tinner\n` }).toString().trim();
      const listing = `100644 blob ${blob}\tstatus.json\n100755 blob ${blob}\trun me\n120000 blob ${blob}\tlink\n040000 tree ${sub}\tfolder\n`;
      const tree = execFileSync('git', ['--git-dir', dir, 'mktree'], { input: listing }).toString().trim();
      const raw = execFileSync('git', ['--git-dir', dir, 'cat-file', 'tree', tree]);
      const entries = treeEntries(raw, tree.length / 2);
      const listed = execFileSync('git', ['--git-dir', dir, 'ls-tree', tree]).toString().trim().split('\n').map((l) => {
        const [meta, name] = l.split('\t');
        const [mode, , oid] = meta!.split(' ');
        return { mode: mode!.replace(/^0+/, ''), name: name!, oid: oid! };
      });
      expect(entries).toEqual(listed);
      expect(entries.filter((e) => isFileMode(e.mode)).map((e) => e.name).sort()).toEqual(['link', 'run me', 'status.json']);
      // A damaged tail is left out, not read past the end.
      expect(treeEntries(raw.subarray(0, raw.length - 3), tree.length / 2)).toEqual(entries.slice(0, -1));
    });
  }
});
