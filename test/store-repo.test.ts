/**
 * The report store's generations (mesh-cli/status/store-repo.ts): emptying the store moves
 * `reports.git` to a new repository and leaves the one a run at work took in place, marked
 * retired, until RETIRED_FOR has passed; an earlier version's folder is taken over the same way.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_PACKS, RETIRED_FOR, storeRepo } from '../mesh-cli/status/store-repo.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();
const CONFIG = '[core]\n\tbare = true\n';

/** `n` more pack files in `repo` (names only: the count is what empties a store). */
function addPacks(repo: string, n: number): void {
  const dir = join(repo, 'objects', 'pack');
  const have = readdirSync(dir).length;
  for (let i = 0; i < n; i++) writeFileSync(join(dir, `pack-${have + i}.pack`), '');
}

const generations = (folder: string) => readdirSync(folder).filter((f) => f.startsWith('reports.git-')).sort();

describe('the report store in generations', () => {
  it('keeps the generation it has until it holds too many packs, then moves the link and leaves the old one whole', () => {
    const folder = tempDir('mesh-store-repo-');
    const first = storeRepo(folder, CONFIG);
    expect(readlinkSync(join(folder, 'reports.git'))).toBe(first.split('/').pop());
    expect(readFileSync(join(first, 'config'), 'utf8')).toBe(CONFIG);
    addPacks(first, MAX_PACKS);
    expect(storeRepo(folder, CONFIG)).toBe(first); // at the limit: kept
    addPacks(first, 1);
    const t0 = Date.now();
    const second = storeRepo(folder, CONFIG, t0);
    expect(second).not.toBe(first);
    expect(readlinkSync(join(folder, 'reports.git'))).toBe(second.split('/').pop());
    expect(readdirSync(join(second, 'objects', 'pack'))).toEqual([]);
    // the run that took the first generation still finds all it had
    expect(readdirSync(join(first, 'objects', 'pack'))).toHaveLength(MAX_PACKS + 1);
    expect(existsSync(join(first, 'mesh-retired'))).toBe(true);
    expect(storeRepo(folder, CONFIG, t0 + RETIRED_FOR - 1000)).toBe(second);
    expect(generations(folder)).toHaveLength(2);
    expect(storeRepo(folder, CONFIG, t0 + RETIRED_FOR + 1000)).toBe(second);
    expect(generations(folder)).toEqual([second.split('/').pop()]);
  });

  it('takes over an earlier version\'s folder: used until it is emptied, then retired like a generation', () => {
    const folder = tempDir('mesh-store-repo-');
    const old = join(folder, 'reports.git');
    mkdirSync(join(old, 'objects', 'pack'), { recursive: true });
    writeFileSync(join(old, 'config'), 'old');
    expect(storeRepo(folder, CONFIG)).toBe(old);
    expect(readFileSync(join(old, 'config'), 'utf8')).toBe(CONFIG);
    addPacks(old, MAX_PACKS + 1);
    const now = storeRepo(folder, CONFIG);
    expect(lstatSync(old).isSymbolicLink()).toBe(true);
    const retired = generations(folder).filter((g) => join(folder, g) !== now);
    expect(retired).toHaveLength(1);
    expect(readdirSync(join(folder, retired[0]!, 'objects', 'pack'))).toHaveLength(MAX_PACKS + 1);
  });

  it('makes a new generation where the link names one that is gone', () => {
    const folder = tempDir('mesh-store-repo-');
    rmSync(storeRepo(folder, CONFIG), { recursive: true });
    const second = storeRepo(folder, CONFIG);
    expect(readlinkSync(join(folder, 'reports.git'))).toBe(second.split('/').pop());
    expect(generations(folder)).toEqual([second.split('/').pop()]);
  });
});
