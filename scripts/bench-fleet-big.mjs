// Bench phase 2: a fleet of 10,000 nodes. Node identities and declarations are generated in
// one commit; each node's reports are made by the real report code (built, signed by the
// node key, committed) in a scratch git dir and moved to the server with one `git push`
// instead of 10,000. A sample of real simulated hosts then measures poll, changed poll and
// push at this size, against the server that authenticates each node and hides other
// nodes' report branches (`mesh-cli serve`, as a fleet runs it) and against `mesh-cli serve
// --open`, which hides nothing. `mesh-cli status` runs over all nodes.
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { commitFiles, git, measured, nodeNames, perOp, pool, progress } from './bench-fleet-lib.mjs';

/** V8's full collection, as `--expose-gc` gives it, without the flag on node's command line. */
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc');

const SAMPLE = 8;
/** Status runs with every report changed (an odd number: `status` is the median one). */
const EVERY_CHANGED = 5;
const REPORT = { kind: 'reconcile', digest: `sha256:${'0'.repeat(64)}`, outcome: 'applied', errors: [],
  resources: ['directory:/srv/app', 'file:/etc/motd', 'file:/srv/app/app.ini', 'file:/srv/app/revision'].map((id) => ({ id, result: 'unchanged' })),
  counts: { changed: 0, drift: 0, failed: 0, unchanged: 4 } };

/** Status runs with every report changed over the report shards (median of these). */
const SHARDED_EVERY = 3;

/** Run phase 2 with `n` nodes (`shards` > 0: status again with the reports in that many shard repositories beside `bare`). */
export async function bigFleet(sim, { n, work, bare, server, open, statusRun, shards = 0 }) {
  mkdirSync(work, { recursive: true });
  const out = { nodes: n, setup: {} };
  const clock = () => performance.now() / 1000;
  progress(`phase 2: ${n} nodes, generated`);
  let t = clock();
  const keys = nodeNames(n).map((name) => sim.nodeKeys(name));
  const now = new Date();
  const files = { 'mesh.yaml': 'name: bench\nmainBranch: main\ntrust: none\nsigners: []\n' };
  for (const k of keys) Object.assign(files, { [`nodes/${k.node}/node.yaml`]: sim.identityYaml(k, now), [`nodes/${k.node}/base.yaml`]: sim.declarationYaml(k.node) });
  const main = commitFiles(bare, files, `fleet: ${n} nodes`);
  out.setup.fleetS = clock() - t;

  const scratch = join(work, 'scratch.git');
  git(work, ['init', '--quiet', '--bare', scratch]);
  // The generator (this process, ~1 GB of keys and objects) collects its garbage after a round,
  // whole and at once, then pauses; status is timed after that, as it would run on an operator's
  // machine. Left to V8, that collection ran in the background threads while a status was timed
  // (up to 0.5 s of this process's CPU, on a machine of two cores).
  const settle = () => {
    collectGarbage();
    return new Promise((resolve) => setTimeout(resolve, 2000));
  };
  const reportRound = async (round, who = keys, { push = true } = {}) => {
    progress(`report round ${round}: ${who.length} reports made by the report code, one git push`);
    const t0 = clock();
    await sim.generateReports(scratch, who, main, REPORT, new Date(now.getTime() + round * 15 * 60_000));
    const t1 = clock();
    if (!push) return { generateS: t1 - t0 };
    git(scratch, ['push', '--quiet', '--force', bare, 'refs/heads/reports/*:refs/heads/reports/*']);
    git(bare, ['pack-refs', '--all']);
    const pushed = clock();
    await settle();
    return { generateS: t1 - t0, pushS: pushed - t1 };
  };
  out.setup.reports1 = await reportRound(1);
  // The generated report commits are what a host makes: git itself accepts their SSH signature.
  const signers = join(work, 'allowed_signers');
  writeFileSync(signers, `${keys[0].node} ${keys[0].nodeKey}\n`);
  out.generatedCommitVerifies = gitOk(bare, ['-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${signers}`, 'verify-commit', `refs/heads/reports/${keys[0].node}`]);

  // The operator's first fetch of everything (cold), then status with reports changed since the last fetch.
  const checkout = join(work, 'operator');
  progress('operator clone (cold)');
  const cold = await measured(server, async () => git(work, ['clone', '--quiet', `${server.operatorUrl}fleet.git`, checkout]));
  out.coldClone = { wallS: cold.wallS, serverCpuS: cold.serverCpuS };
  // status builds its report index on its first run (every report new, every node.yaml parsed);
  // the Must-show is the next one: a warm checkout, every report changed since the last fetch.
  progress('mesh-cli status, first run in the new checkout (builds its report index)');
  out.statusCold = await statusRun(checkout, n);
  // One run says little on a shared machine (the same work varies by tens of percent in CPU time
  // from hour to hour), so it is timed after each of several rounds and the median run is `status`.
  out.statusEvery = [];
  for (let round = 2; round < 2 + EVERY_CHANGED; round++) {
    // Kept for runs by hand (MESH_BENCH_KEEP): the checkout's index before the last round with every
    // report changed, and the server's report tips after it, so that run can be repeated (A/B).
    const last = process.env.MESH_BENCH_KEEP && round === 1 + EVERY_CHANGED;
    if (last) cpSync(join(checkout, '.git', 'mesh'), join(work, 'ab', 'mesh'), { recursive: true, verbatimSymlinks: true });
    out.setup[`reports${round}`] = await reportRound(round);
    // (each line ends with a newline: `git update-ref --stdin` refuses the whole file when the last does not)
    if (last) writeFileSync(join(work, 'ab', 'tips'), git(bare, ['for-each-ref', '--format=update %(refname) %(objectname)', 'refs/heads/reports/']) + '\n');
    progress(`mesh-cli status: every report changed since the last run (${round - 1} of ${EVERY_CHANGED})`);
    out.statusEvery.push(await statusRun(checkout, n));
  }
  out.status = [...out.statusEvery].sort((x, y) => x.totalS - y.totalS)[EVERY_CHANGED >> 1];
  out.setup.reportsTenth = await reportRound(2 + EVERY_CHANGED, keys.slice(0, Math.round(n / 10)));
  progress('mesh-cli status: a tenth of the reports changed');
  out.statusTenth = await statusRun(checkout, n);
  progress('mesh-cli status: nothing changed');
  out.statusSame = await statusRun(checkout, n);
  if (shards > 0) out.sharded = await shardedStatus(sim, { k: shards, n, work, bare, server, keys, scratch, main, statusRun, reportRound, rounds: 3 + EVERY_CHANGED });
  progress(`${SAMPLE} sample hosts on mesh-cli serve, then ${SAMPLE} more on mesh-cli serve --open`);
  out.hidden = await sample(sim, { work: join(work, 'hidden'), server, bare, keys: keys.slice(0, SAMPLE), tune: true });
  out.plain = await sample(sim, { work: join(work, 'plain'), server: open, bare, keys: keys.slice(SAMPLE, 2 * SAMPLE) });
  if (process.env.MESH_BENCH_KEEP) {
    // The sample hosts changed main: the kept index gets the node list of main as it is now, so that
    // a run by hand does not find every node.yaml again (which the bench's own runs did not). Its
    // exit is not asked for (the sample hosts' reports may fail it): the index is written either way.
    await statusRun(checkout, n).catch(() => undefined);
    for (const file of ['nodes.json', 'identities.json']) cpSync(join(checkout, '.git', 'mesh', file), join(work, 'ab', 'mesh', file));
  }
  return out;
}

/**
 * Status with the reports sharded over `k` repositories on the same server (mesh.yaml
 * `reports.shards`; each node's branch in the shard core/report/shard.ts picks): a new checkout
 * of main naming them, its first run, then SHARDED_EVERY runs with every report changed. The
 * shards live beside `bare` and are served by the same `mesh-cli serve`.
 */
async function shardedStatus(sim, { k, n, work, bare, server, keys, scratch, main, statusRun, reportRound, rounds }) {
  const data = join(bare, '..');
  const names = Array.from({ length: k }, (_, i) => `fleet-reports-${i}.git`);
  for (const name of names) git(data, ['init', '--quiet', '--bare', '--initial-branch=main', name]);
  const mesh = `name: bench\nmainBranch: main\ntrust: none\nsigners: []\nreports:\n  shards:\n${names.map((x) => `    - ${server.url}${x}\n`).join('')}`;
  const sharded = commitFiles(bare, { 'mesh.yaml': mesh }, `reports in ${k} shards`, git(bare, ['rev-parse', 'main']));
  const bySharding = names.map((_, i) => keys.filter((key) => sim.shardOf(key.node, k) === i).map((key) => key.node));
  // The shards borrow the objects of the fleet repository and of the scratch repository the
  // reports are made in (git alternates), and take their tips from it by update-ref: a push of
  // 2,500 branches per shard per round would time git's connectivity checks, not status.
  for (const name of names) writeFileSync(join(data, name, 'objects', 'info', 'alternates'), `${join(bare, 'objects')}\n${join(scratch, 'objects')}\n`);
  const spread = () => {
    const tips = new Map(git(scratch, ['for-each-ref', '--format=%(refname) %(objectname)', 'refs/heads/reports/']).split('\n').map((l) => l.split(' ')));
    names.forEach((name, i) => {
      git(join(data, name), ['update-ref', '--stdin'], bySharding[i].map((node) => `update refs/heads/reports/${node} ${tips.get(`refs/heads/reports/${node}`)}\n`).join(''));
      git(join(data, name), ['pack-refs', '--all']);
    });
  };
  progress(`report shards: ${k} repositories of ${bySharding.map((x) => x.length).join(', ')} nodes`);
  for (const name of names) git(join(data, name), ['update-ref', 'refs/heads/main', sharded]);
  spread();
  const checkout = join(work, 'operator-sharded');
  git(work, ['clone', '--quiet', `${server.operatorUrl}fleet.git`, checkout]);
  const out = { shards: k, nodesPerShard: bySharding.map((x) => x.length), main: sharded };
  progress(`mesh-cli status over ${k} shards, first run in a new checkout`);
  out.statusCold = await statusRun(checkout, n);
  out.statusEvery = [];
  for (let round = 0; round < SHARDED_EVERY; round++) {
    await reportRound(rounds + round, keys, { push: false });
    spread();
    progress(`mesh-cli status over ${k} shards: every report changed since the last run (${round + 1} of ${SHARDED_EVERY})`);
    out.statusEvery.push(await statusRun(checkout, n));
  }
  out.status = [...out.statusEvery].sort((x, y) => x.totalS - y.totalS)[SHARDED_EVERY >> 1];
  // main back as it was, for the sample hosts that follow (their reports go to the fleet repository).
  git(bare, ['update-ref', 'refs/heads/main', main]);
  return out;
}

function gitOk(cwd, args) {
  try {
    git(cwd, args);
    return true;
  } catch {
    return false;
  }
}

/** SAMPLE real hosts on `server`: first fetch, no-op poll, changed poll, report push; per host averages. */
async function sample(sim, { work, server, bare, keys, tune = false }) {
  const url = `${server.url}fleet.git`;
  const template = join(work, 'template');
  const first = await measured(server, () => sim.fetchTemplate(template, url, keys[0]));
  const hosts = await pool(keys, 8, (k) => sim.SimHost.open(join(work, k.node), url, k, { template }));
  await Promise.all(hosts.map((h) => h.repo.adopt(`refs/heads/reports/${h.node}`)));
  const meters = () => hosts.map((h) => h.meter());
  const out = { firstFetch: { requests: first.result.requests, bytes: first.result.sent + first.result.received, serverCpuS: first.serverCpuS } };
  let before = meters();
  const noop = await measured(server, () => Promise.all(hosts.map((h) => h.contact())));
  out.noopPoll = { ...perOp(before, meters()), serverCpuPerPollS: noop.serverCpuS / hosts.length };
  commitFiles(bare, { [`nodes/${keys[0].node}/base.yaml`]: sim.declarationYaml(keys[0].node, Date.now()) }, 'one node changes', git(bare, ['rev-parse', 'main']));
  before = meters();
  const changed = await measured(server, () => pool(hosts, 4, (h) => h.contact()));
  out.changedPoll = { ...perOp(before, meters()), serverCpuPerPollS: changed.serverCpuS / hosts.length };
  before = meters();
  const pushed = await measured(server, () => pool(hosts, 4, (h, i) => h.report(changed.result[i].body, new Date())));
  out.push = { ...perOp(before, meters()), serverCpuPerPushS: pushed.serverCpuS / hosts.length };
  if (!tune) return out;
  // receive-pack checks a push against every ref of the repository it quarantines objects in,
  // hidden or not; limiting those "alternate refs" to main is the server setting docs/scale.md proposes.
  git(bare, ['config', 'core.alternateRefsPrefixes', 'refs/heads/main']);
  before = meters();
  const tuned = await measured(server, () => pool(hosts, 4, (h, i) => h.report(changed.result[i].body, new Date(Date.now() + 60_000))));
  out.pushTuned = { ...perOp(before, meters()), serverCpuPerPushS: tuned.serverCpuS / hosts.length };
  git(bare, ['config', '--unset', 'core.alternateRefsPrefixes']);
  return out;
}
