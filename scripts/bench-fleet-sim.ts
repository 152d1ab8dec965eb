/**
 * Simulated hosts for `npm run bench:fleet`, bundled by scripts/bench-fleet.mjs. A simulated
 * host is the real host code with no machine behind it: the fleet client (agent/fleet/git.ts:
 * poll, fetch, commit, push), the declaration loader, and the report code (agent/report.ts:
 * build, sign, commit, send). Only the apply step is left out: every resource is "unchanged".
 */
import { copyFileSync, linkSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { KeyObject } from 'node:crypto';
import { resourceId } from '../schema/resource-id.js';
import type { HostConfig } from '../agent/config.js';
import { loadDeclaration } from '../core/declaration/load.js';
import { openFleetRepo, type FleetRepo } from '../agent/fleet/git.js';
import { fleetHttp, type FleetHttp, type Meter } from '../agent/fleet/http.js';
import { buildReport, recordReport, sameAsLast, sendReports, type ReportBody } from '../agent/report.js';
import { reportRef } from '../core/report/branch.js';
import { openStore, type Store } from '../agent/store/store.js';
import type { NodeKeys } from './bench-fleet-keys.js';
import { PLACEHOLDER_FACTS } from '../schema/facts.js';

export { nodeKeys, identityYaml, declarationYaml, type NodeKeys } from './bench-fleet-keys.js';
export { generateReports } from './bench-fleet-generate.js';
export { shardOf } from '../core/report/shard.js';

/** One simulated host: its own git dir, HTTP client (and meter), store and node key. */
export class SimHost {
  private constructor(
    readonly node: string,
    readonly http: FleetHttp,
    readonly repo: FleetRepo,
    readonly store: Store,
    private readonly config: HostConfig,
    private readonly key: KeyObject,
  ) {}

  /** A host in `dir` with the node's credential; its git dir starts as a copy of `template` (a shallow fetch of main made once for all). */
  static async open(dir: string, url: string, keys: NodeKeys, opts: { template?: string } = {}): Promise<SimHost> {
    const gitdir = join(dir, 'git');
    if (opts.template) copyGitdir(opts.template, gitdir);
    const http = fleetHttp({ credential: { username: keys.node, password: keys.secret } });
    const repo = await openFleetRepo(gitdir, url, http);
    const config = { format: 1, node: keys.node, generation: 1, url, mainBranch: 'main', nodeKey: keys.nodeKey, tokenKey: keys.tokenKey, vouch: keys.vouch, signers: [], enrolledAt: new Date(0).toISOString(), ineligible: [] } as unknown as HostConfig;
    return new SimHost(keys.node, http, repo, openStore(join(dir, 'store.json')), config, keys.privateKey);
  }

  /** contact → load: poll main, fetch only when it moved, read and validate nodes/<node>/. */
  async contact(): Promise<{ commit: string; moved: boolean; body: ReportBody }> {
    const tip = await this.repo.poll('main');
    if (!tip) throw new Error('the fleet repo has no main');
    const moved = tip !== (await this.repo.fetched('main'));
    const commit = moved ? await this.repo.fetch('main') : tip;
    const loaded = await loadDeclaration(this.repo.tree(commit), this.node, { facts: PLACEHOLDER_FACTS });
    if (!loaded.ok) throw new Error(`${this.node}: ${loaded.problems[0]?.message}`);
    const resources = loaded.declaration.resources.map((r) => ({ id: resourceId(r), result: 'unchanged' as const }));
    const counts = { changed: 0, drift: 0, failed: 0, unchanged: resources.length };
    return { commit, moved, body: { kind: 'reconcile', commit, digest: loaded.declaration.digest, outcome: 'applied', errors: [], resources, counts } };
  }

  /**
   * report: build, sign, commit and push, as reconcile's report stage does. A report that says
   * nothing new is committed as a heartbeat: the repo is handed to recordReport with
   * `{ heartbeat: true }` added to its commits, the one-line change report.ts still needs.
   * `replace: false` stacks every report instead (what history would be without replacement).
   */
  async report(body: ReportBody, now: Date, opts: { replace?: boolean } = {}): Promise<{ heartbeat: boolean }> {
    const report = buildReport(this.config, this.store, body, now);
    const heartbeat = sameAsLast(this.store, report) && opts.replace !== false;
    // recordReport marks a report that says nothing new as a heartbeat itself; stacking overrides that.
    const repo: FleetRepo = opts.replace === false ? { ...this.repo, commit: (ref, files, message, onSign, o) => this.repo.commit(ref, files, message, onSign, { ...o, heartbeat: false }) } : this.repo;
    await recordReport(repo, this.store, report, this.key);
    await sendReports(this.repo, this.store, this.node);
    return { heartbeat };
  }

  meter(): Meter {
    return this.http.meter();
  }

  /** The local report branch tip (what the server must have once the report landed). */
  tip(): Promise<string | null> {
    return this.repo.local(reportRef(this.node));
  }
}

/** Copy a git dir, hard-linking its packs (git never writes to a pack once it is made; refs and config are copied). */
function copyGitdir(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const [src, dst] = [join(from, entry.name), join(to, entry.name)];
    if (entry.isDirectory()) copyGitdir(src, dst);
    else if (from.endsWith(join('objects', 'pack'))) linkSync(src, dst);
    else copyFileSync(src, dst);
  }
}

/** A fresh git dir with main fetched (shallow, the way a host's first fetch is), as node `keys`: the template every simulated host copies. */
export async function fetchTemplate(gitdir: string, url: string, keys: NodeKeys): Promise<Meter> {
  const http = fleetHttp({ credential: { username: keys.node, password: keys.secret } });
  const repo = await openFleetRepo(gitdir, url, http);
  await repo.fetch('main');
  return http.meter();
}
