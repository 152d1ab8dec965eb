/**
 * A cache of the packs `git upload-pack` makes, so that 10,000 hosts fetching the same change of
 * main do not make git build the same pack 10,000 times (large git hosts do the same: GitLab's
 * pack-objects cache). git runs the hook below instead of `git pack-objects`
 * (`uploadpack.packObjectsHook`, honoured only from the command line or global config, which is
 * how the server hands it over: GIT_CONFIG_COUNT). pack-objects' output is a function of its
 * arguments and its input (the wanted and common commits, the shallow ones), so a request with
 * the same arguments and input in the same repository gets the pack made for the first one.
 *
 * upload-pack checks what a client may want before it starts pack-objects, so a cached pack only
 * ever goes to a request that could have had it made. While one request makes a pack, the same
 * requests wait for it (a lock folder beside it) instead of making it again. The cache holds
 * packs only: it is emptied of entries not used for an hour, and of the least recently used beyond
 * MAX_BYTES, when the server starts and every ten minutes.
 */
import { chmodSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** How long an entry nobody fetched stays, and how much the cache may hold. */
const MAX_AGE_MS = 60 * 60 * 1000;
const MAX_BYTES = 512 * 1024 * 1024;
const SWEEP_EVERY_MS = 10 * 60 * 1000;

/** The hook, for the cache folder `dir`. */
function hookScript(dir: string): string {
  return `#!/bin/sh
# Written by mesh-cli serve at every start: git upload-pack runs this instead of git pack-objects
# (uploadpack.packObjectsHook). The same request in the same repository gets the same pack: the
# first host to fetch a change makes it, the others get a copy (mesh-cli/server/pack-cache.ts).
# Few processes on the way to a copy: a fleet's hosts all fetch the same change at once.
cache=${shellQuote(dir)}
input=$(cat) || exit 1
key=$(printf '%s\\n%s\\n%s\\n' "$PWD" "$*" "$input" | sha256sum) || exit 1
pack="$cache/\${key%% *}.pack"
# Hosts that ask for a pack being made wait for it (up to a minute), rather than make it again.
locked=no
waited=0
while [ ! -f "$pack" ]; do
  if mkdir "$pack.lock" 2>/dev/null; then locked=yes; break; fi
  [ "$waited" -lt 600 ] || break
  sleep 0.1
  waited=$((waited + 1))
done
unlock() { [ "$locked" = no ] || rmdir "$pack.lock" 2>/dev/null; }
# cat fails before writing anything when there is no such entry; then the pack is made.
if [ -f "$pack" ] && cat "$pack" 2>/dev/null; then
  unlock
  touch -c "$pack"
  exit 0
fi
made="$pack.$$"
printf '%s\\n' "$input" | "$@" > "$made" || { status=$?; rm -f "$made"; unlock; exit $status; }
mv -f "$made" "$pack"
unlock
exec cat "$pack"
`;
}

export interface PackCache {
  /** The git config that puts the hook in front of pack-objects. */
  config: Array<[string, string]>;
  close(): void;
}

/** Install the hook for the data folder `data` (its cache in DATA/.mesh-pack-cache) and start sweeping it. */
export function openPackCache(data: string): PackCache {
  const dir = join(data, '.mesh-pack-cache');
  const hooks = join(data, '.mesh-hooks');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  mkdirSync(hooks, { recursive: true, mode: 0o700 });
  const hook = join(hooks, 'pack-objects');
  writeFileSync(hook, hookScript(dir), { mode: 0o755 });
  chmodSync(hook, 0o755);
  // A pack being made when an earlier server was stopped is not being made any more.
  for (const name of safeList(dir)) if (name.endsWith('.lock')) rmSync(join(dir, name), { recursive: true, force: true });
  sweepPackCache(dir);
  const timer = setInterval(() => sweepPackCache(dir), SWEEP_EVERY_MS);
  timer.unref();
  return { config: [['uploadpack.packObjectsHook', hook]], close: () => clearInterval(timer) };
}

/**
 * Remove what was not used for `maxAgeMs` (entries, and the leftovers of a hook that was killed),
 * then the least recently used entries while the rest holds more than `maxBytes`.
 */
export function sweepPackCache(dir: string, now = Date.now(), maxAgeMs = MAX_AGE_MS, maxBytes = MAX_BYTES): void {
  const kept: Array<{ file: string; used: number; size: number }> = [];
  for (const name of safeList(dir)) {
    const file = join(dir, name);
    const st = statSync(file, { throwIfNoEntry: false });
    if (!st) continue;
    if (now - st.mtimeMs > maxAgeMs) rmSync(file, { recursive: true, force: true });
    else if (/^[0-9a-f]{64}\.pack$/.test(name)) kept.push({ file, used: st.mtimeMs, size: st.size });
  }
  let total = kept.reduce((sum, e) => sum + e.size, 0);
  for (const e of kept.sort((a, b) => a.used - b.used)) {
    if (total <= maxBytes) break;
    rmSync(e.file, { force: true });
    total -= e.size;
  }
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
