// Bench phase 5: a burst of hosts that each need git, against the cap on the server's git processes
// (`mesh-cli serve --git-processes N --git-queue N`, mesh-cli/server/git-slots.ts). N hosts sit on N
// different commits of main (one `git fast-import` of N commits, each changing one node's file) and
// all fetch main's tip at once: no two requests are alike, so neither the fetch cache nor the pack
// cache answers any, and each one is `git http-backend` → `upload-pack` → `pack-objects`. The same
// burst runs against the default cap (GIT_PROCESSES, GIT_QUEUE) and against no cap. A refused
// request waits its Retry-After and asks again, as mesh-host does (agent/fleet/http.ts). Measured:
// the burst's wall time, each request's time to its answer, the 429s, and, sampled every 10 ms
// from /proc, how many git processes ran at once and their resident memory together.
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { git, importData, measured, progress } from './bench-fleet-lib.mjs';

/** The server's defaults on this machine (mesh-cli/server/git-http.ts). */
const DEFAULT_CAP = { processes: Math.max(8, 4 * cpus().length), queue: 256 };

/** Run phase 5 with `n` hosts; `served(name, opts)` starts a server on a new fleet repo. */
export async function burst({ n, served }) {
  progress(`phase 5: ${n} hosts on ${n} different commits fetch main at once`);
  const out = { hosts: n, cap: DEFAULT_CAP };
  for (const [side, cap] of [['capped', DEFAULT_CAP], ['uncapped', { processes: n * 2, queue: 0 }]]) {
    const { bare, server } = await served(`burst-${side}`, { open: true, args: ['--git-processes', String(cap.processes), '--git-queue', String(cap.queue)] });
    const commits = history(bare, n);
    const tip = commits.at(-1);
    const watch = watchGit(server.pid);
    const { result, wallS, serverCpuS } = await measured(server, () => Promise.all(commits.slice(0, n).map((have) => fetchMain(server.url, tip, have))));
    const { peak, peakRssMb } = watch.stop();
    const times = result.map((r) => r.ms).sort((a, b) => a - b);
    const at = (q) => Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))]);
    out[side] = { wallS, serverCpuS, answered: result.filter((r) => r.pack).length, refusals: result.reduce((s, r) => s + r.refusals, 0), p50Ms: at(0.5), p90Ms: at(0.9), maxMs: at(1), peakGitProcesses: peak, peakGitRssMb: peakRssMb };
    progress(`  ${side}: ${wallS.toFixed(1)} s, ${out[side].refusals} refusals, ${peak} git processes at most, ${peakRssMb} MB`);
  }
  return out;
}

/** `n` commits on main, each changing its own node's base.yaml (~5 KB), in one pack as a gc'd repository has them; their ids, oldest first. */
function history(bare, n) {
  const stream = Array.from({ length: n }, (_, i) => {
    const text = Array.from({ length: 60 }, (_, k) => `# ${i}-${k} ${'x'.repeat(60)} ${(i * 7919 + k * 104729) % 1000003}`).join('\n') + '\n';
    return `commit refs/heads/main\nmark :${i + 1}\ncommitter mesh-bench <bench@localhost> ${1_700_000_000 + i} +0000\n${importData(`step ${i}`)}${i ? `from :${i}\n` : ''}M 100644 inline nodes/n-${i}/base.yaml\n${importData(text)}`;
  });
  git(bare, ['fast-import', '--quiet'], stream.join(''));
  return git(bare, ['rev-list', '--reverse', 'main']).split('\n');
}

const pkt = (s) => (Buffer.byteLength(s) + 4).toString(16).padStart(4, '0') + s;

/** One host's fetch of `tip` from `have`, as isomorphic-git asks it (protocol v1); a 429 is waited out and asked again. */
async function fetchMain(url, tip, have) {
  const body = pkt(`want ${tip} multi_ack_detailed no-done side-band-64k thin-pack ofs-delta agent=git/isomorphic-git@1.27.1\n`) + '0000' + pkt(`have ${have}\n`) + pkt('done\n');
  const started = performance.now();
  let refusals = 0;
  for (;;) {
    const answer = await fetch(`${url}fleet.git/git-upload-pack`, { method: 'POST', headers: { 'Content-Type': 'application/x-git-upload-pack-request' }, body });
    const bytes = Buffer.from(await answer.arrayBuffer());
    if (answer.status === 429) {
      refusals++;
      await new Promise((resolve) => setTimeout(resolve, Number(answer.headers.get('retry-after')) * 1000 * (1 + 0.2 * Math.random())));
      continue;
    }
    return { ms: performance.now() - started, refusals, pack: answer.status === 200 && bytes.includes('PACK') };
  }
}

/** Sample, every 10 ms, the git processes below `pid` and their resident memory together. */
function watchGit(pid) {
  let peak = 0;
  let peakKb = 0;
  const parents = () => {
    const parentOf = new Map();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const status = readFileSync(`/proc/${entry}/status`, 'utf8');
        parentOf.set(Number(entry), { ppid: Number(/PPid:\s+(\d+)/.exec(status)[1]), name: /Name:\s+(\S+)/.exec(status)[1], kb: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) });
      } catch {
        // gone between the listing and the read
      }
    }
    return parentOf;
  };
  const timer = setInterval(() => {
    const all = parents();
    const below = (p) => { for (let x = all.get(p)?.ppid; x; x = all.get(x)?.ppid) if (x === pid) return true; return false; };
    let count = 0;
    let kb = 0;
    for (const [p, info] of all) if (info.name.startsWith('git') && below(p)) (count++, (kb += info.kb));
    peak = Math.max(peak, count);
    peakKb = Math.max(peakKb, kb);
  }, 10);
  return { stop: () => (clearInterval(timer), { peak, peakRssMb: Math.round(peakKb / 1024) }) };
}

/** The phase's rows for the table. */
export function burstRows(r) {
  if (!r) return [];
  const side = (s) => `${s.wallS.toFixed(1)} s; each host's answer p50 ${(s.p50Ms / 1000).toFixed(1)} s, p90 ${(s.p90Ms / 1000).toFixed(1)} s, last ${(s.maxMs / 1000).toFixed(1)} s; ${s.refusals} × 429; server CPU ${s.serverCpuS.toFixed(1)} s`;
  return [
    ['', `serve --git-processes ${r.cap.processes} --git-queue ${r.cap.queue} (the defaults here)`, 'no cap'],
    [`${r.hosts} hosts on ${r.hosts} different commits fetch main at once (${r.capped.answered} and ${r.uncapped.answered} answered)`, side(r.capped), side(r.uncapped)],
    ['  git processes at once, at most; their resident memory together', `${r.capped.peakGitProcesses}; ${r.capped.peakGitRssMb} MB`, `${r.uncapped.peakGitProcesses}; ${r.uncapped.peakGitRssMb} MB`],
  ];
}
