/**
 * The briefing: the structured result of enrolment, one line per check ({check, ok, detail}).
 * Its outcome is computed from the lines, never set by hand: any failed line makes the node
 * ineligible, and an ineligible node applies only an empty declaration until it re-enrols.
 * Adoption always completes, so a failed check is reported rather than refused.
 */
import { unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HttpClient } from 'isomorphic-git';
import type { NodeIdentity } from '../schema/fleet.js';
import type { BriefingLine, Report } from '../schema/report.js';
import { messageOf } from '../core/errors.js';
import { age, MAX_CLOCK_SKEW_MS } from '../core/duration.js';
import type { ServerClock } from './fleet/http.js';
import { hasPackageManager } from './profile.js';
import type { Store } from './store/store.js';
import { verifyReport } from '../core/report/verify.js';
import { fromRecoveryCopy } from './report.js';
import { sameKeyIfWellFormed } from '../core/sign/sshsig.js';

/** `enrolled` when every line passed, else `ineligible`. */
export function briefingOutcome(lines: BriefingLine[]): 'enrolled' | 'ineligible' {
  return lines.every((l) => l.ok) ? 'enrolled' : 'ineligible';
}

/** The failed lines as report errors, so that every report of an ineligible node says why. */
export function ineligibleErrors(failed: BriefingLine[]): Report['errors'] {
  return failed.map((l) => ({ code: 'E_INELIGIBLE', message: `ineligible: briefing check '${l.check}' failed: ${l.detail}` }));
}

/** Compare the local clock with the Date header of the git server's answer to one small request. */
export async function clockLine(http: HttpClient, url: string, now: () => Date): Promise<BriefingLine> {
  const check = 'clock within 5 minutes of the git server';
  try {
    const before = now().getTime();
    const res = await http.request({ url: `${url.replace(/\/$/, '')}/info/refs?service=git-upload-pack`, method: 'GET', headers: { 'git-protocol': 'version=2' } });
    for await (const _chunk of res.body ?? []) void _chunk; // drain, so the socket is reused
    const local = (before + now().getTime()) / 2;
    const date = Object.entries(res.headers ?? {}).find(([k]) => k.toLowerCase() === 'date')?.[1];
    if (!date || Number.isNaN(Date.parse(date))) return { check, ok: false, detail: `the server at ${url} sent no Date header (HTTP ${res.statusCode}), so the clock cannot be checked` };
    const skew = Math.round((local - Date.parse(date)) / 1000);
    const detail = `local clock ${skew >= 0 ? '+' : ''}${skew}s from the server's (${date})`;
    return { check, ok: Math.abs(skew) * 1000 <= MAX_CLOCK_SKEW_MS, detail: Math.abs(skew) * 1000 <= MAX_CLOCK_SKEW_MS ? detail : `${detail}: set the clock (e.g. enable NTP) and enrol again` };
  } catch (e) {
    return { check, ok: false, detail: `cannot ask the server for its time: ${messageOf(e)}` };
  }
}

/**
 * A report line when this machine's clock is off the fleet server's by more than enrolment allows,
 * as the pass's own requests found it (`clock`: from the Date of the server's last answer); null
 * otherwise. The clock drifted since enrolment: a report stamped by it misleads whoever reads it.
 */
export function clockSkewLine(clock: ServerClock | null): Report['errors'][number] | null {
  if (!clock || Math.abs(clock.skewMs) <= MAX_CLOCK_SKEW_MS) return null;
  const off = `${age(Math.abs(clock.skewMs))} ${clock.skewMs > 0 ? 'ahead of' : 'behind'}`;
  // Without the server's Date itself: a line that says the same from pass to pass lets a pass with nothing new send a heartbeat.
  return { code: 'E_CLOCK', message: `this machine's clock is ${off} the fleet server's: the times of its reports are read from it, so they are off as much; set the clock (e.g. enable NTP)` };
}

/** The package manager mesh drives is there: the root has a dpkg database. */
export function packageManagerLine(root: string): BriefingLine {
  const ok = hasPackageManager(root);
  return { check: 'package manager present', ok, detail: ok ? 'dpkg (var/lib/dpkg/status)' : `no dpkg database under ${root} (var/lib/dpkg/status is missing): mesh cannot manage packages here` };
}

/** The host can create and remove a file at the top of the root. */
export function rootWritableLine(root: string): BriefingLine {
  const probe = join(root, `.mesh-host-probe-${process.pid}`);
  try {
    writeFileSync(probe, '');
    unlinkSync(probe);
    return { check: 'root writable', ok: true, detail: `created and removed a file in ${root}` };
  } catch (e) {
    return { check: 'root writable', ok: false, detail: `cannot write in ${root}: ${messageOf(e)}` };
  }
}

/** The last report the server holds for the node: its status.json and signature, or null when it has none. */
export interface LastReport {
  status: string | null;
  sig: string | null;
}

/**
 * Recover the owned set into an empty store from the node's last report, when that report's
 * chain verifies against node.yaml (an earlier generation, since a token is used only once) and
 * this machine made it: it still holds the node key that signed it (`heldKey`, its public line,
 * null when it holds none), and lost only its store. A machine that does not (rebuilt, or new
 * under the same name) holds nothing of what the report lists: it starts with an empty store, as
 * a new machine, so that its first pass neither calls what it creates drift nor, later, removes
 * as its own a file this machine already had. A store that exists is kept: this machine still
 * knows what it owns.
 */
export function recoverStore(store: Store, node: string, last: LastReport | null, identity: NodeIdentity, heldKey: string | null): BriefingLine {
  const check = 'store recovered';
  if (!store.fresh) return { check, ok: true, detail: `kept the existing store (${store.data.owned.length} records)` };
  if (!last) return { check, ok: true, detail: `new store: reports/${node} has no earlier report` };
  const verified = verifyReport(node, last.status, last.sig, identity);
  const report = verified.report;
  if (!report || !verified.chained) {
    return {
      check,
      ok: false,
      detail:
        `the last report on reports/${node} does not verify (${verified.signature}: ${verified.reason}); nothing recovered, so what mesh owned here is not known. ` +
        `If this machine owns nothing of mesh's (a new machine), delete that branch as the operator ('git push origin --delete reports/${node}'), then issue a new token and enrol again`,
    };
  }
  if (heldKey === null || !sameKeyIfWellFormed(heldKey, report.nodeKey)) {
    return { check, ok: true, detail: `new store: report #${report.sequence} on reports/${node} was signed with a node key this machine does not hold, so another machine made it (this one was rebuilt, or is new): nothing it lists is here, and this machine starts owning nothing` };
  }
  store.data.owned = report.owned.map(fromRecoveryCopy);
  const unknown = store.data.owned.filter((r) => r.prior?.known === false).length;
  const note = unknown ? `; ${unknown} existed before mesh took them over and the report holds no copy of them, so un-declaring them will leave them as they are` : '';
  return { check, ok: true, detail: `recovered ${report.owned.length} records from report #${report.sequence} (generation ${report.generation}, ${report.observedAt})${note}` };
}
