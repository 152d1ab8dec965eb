/**
 * The pure parts of review and rollout: a declaration diff from the host's own planner,
 * unified diffs with secrets elided, and the rollout classification (ancestry, and a report
 * whose signature does not verify never counting as applied).
 */
import { describe, expect, it } from 'vitest';
import { statusExit } from '../mesh-cli/commands/status.js';
import type { NodeStatus } from '../mesh-cli/status/node-status.js';
import type { VerifiedReport } from '../core/report/verify.js';
import type { Resource } from '../schema/declaration.js';
import type { Report } from '../schema/report.js';
import { diffDeclarations } from '../mesh-cli/declaration-diff.js';
import { describeFields, formatPlanMarkdown, formatPlanText } from '../mesh-cli/plan-format.js';
import type { PlanResult } from '../mesh-cli/plan-result.js';
import { classify } from '../mesh-cli/rollout.js';
import { elideSecrets, safeDiff, unifiedDiff } from '../core/unified-diff.js';

describe('unified diffs', () => {
  it('show removed lines before added ones, with three lines of context, in separate hunks when far apart', () => {
    const before = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    const after = before.replace('line 2\n', 'line two\n').replace('line 18\n', 'line 18\nline 18b\n');
    expect(unifiedDiff(before, after)).toEqual([
      '@@ -1,5 +1,5 @@', ' line 1', '-line 2', '+line two', ' line 3', ' line 4', ' line 5',
      '@@ -16,5 +16,6 @@', ' line 16', ' line 17', ' line 18', '+line 18b', ' line 19', ' line 20',
    ]);
  });

  it('of a new file add every line, and say when the last line has no newline', () => {
    expect(unifiedDiff('', 'a\nb')).toEqual(['@@ -0,0 +1,2 @@', '+a', '+b', '\\ No newline at end of file (after)']);
    expect(unifiedDiff('same\n', 'same\n')).toEqual([]);
  });

  it('elide the whole content of a file whose name looks secret', () => {
    expect(safeDiff('/etc/app/credentials', 'a\n', 'b\nc\n')).toEqual(['«content of /etc/app/credentials elided (its name looks secret): 1 line removed, 2 lines added»']);
    expect(safeDiff('/etc/motd', 'a\n', 'b\n')).toEqual(['@@ -1,1 +1,1 @@', '-a', '+b']);
  });

  it('elide secret values and private key bodies but keep that the line changed', () => {
    const lines = [' user = app', '-password = hunter2', '+password: "s3cret"', '+api_key=abc', '+-----BEGIN OPENSSH PRIVATE KEY-----', '+b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW', '+QyNTUxOQAAACDmAAAA', '+-----END OPENSSH PRIVATE KEY-----', ' AAAAB3NzaC1yc2EAAAADAQABAAABAQC7vbqajDhA7lZLxJ3bD5nGsh6xkr8dTqs9Zd9vZ'];
    expect(elideSecrets(lines)).toEqual([' user = app', '-password = «elided»', '+password: «elided»', '+api_key=«elided»', '+-----BEGIN OPENSSH PRIVATE KEY-----', '+«private key elided»', '+-----END OPENSSH PRIVATE KEY-----', ' «key material elided»']);
  });

  it('elide URL passwords, Authorization values and the values of keys named like pass, secret, token or key, in ini, env, JSON and YAML', () => {
    const masked = elideSecrets([
      '+DATABASE_URL=postgres://app:hunter2@db:5432/app',
      '+dsn: "mysql://root:toor@127.0.0.1/app"',
      '+Authorization: Bearer eyJhbGciOi.payload.sig',
      '+curl -H "Authorization: Bearer abc123" https://api.example.org',
      '+  "pass": "hunter2",',
      '+{"user": "app", "pass": "x", "port": 5432}',
      '+export DB_PASS=hunter2',
      '+secretKey: abc',
      '+ssl.key = /etc/ssl/private/app.key',
      '-client_token=zzz',
      ' keyboard = us',
      ' bypass_cache = true',
      ' url = https://example.org/a@b',
    ]);
    expect(masked).toEqual([
      '+DATABASE_URL=postgres://app:«elided»@db:5432/app',
      '+dsn: "mysql://root:«elided»@127.0.0.1/app"',
      '+Authorization: «elided»',
      '+curl -H "Authorization: «elided»" https://api.example.org',
      '+  "pass": "«elided»",',
      '+{"user": "app", "pass": "«elided»", "port": 5432}',
      '+export DB_PASS=«elided»',
      '+secretKey: «elided»',
      '+ssl.key = «elided»',
      '-client_token=«elided»',
      ' keyboard = us',
      ' bypass_cache = true',
      ' url = https://example.org/a@b',
    ]);
  });
});

describe('declaration diffs', () => {
  const motd: Resource = { type: 'file', path: '/etc/motd', content: 'hi\n', mode: '0644' };
  const app: Resource = { type: 'directory', path: '/srv/app' };
  const nginx: Resource = { type: 'package', name: 'nginx', version: '1.22' };

  it('list additions, field changes and removals in the order the host would make them', () => {
    const head: Resource[] = [{ ...motd, content: 'hello\n', mode: '0600', owner: 'root' }, { ...nginx, version: '1.24' }, { type: 'user', name: 'app' }];
    expect(diffDeclarations([app, motd, nginx], head)).toEqual({
      reordered: false,
      changes: [
        { action: 'change', id: 'file:/etc/motd', fields: [{ field: 'content' }, { field: 'mode', from: '0644', to: '0600' }, { field: 'owner', to: 'root' }], diff: ['@@ -1,1 +1,1 @@', '-hi', '+hello'] },
        { action: 'change', id: 'package:nginx', fields: [{ field: 'version', from: '1.22', to: '1.24' }] },
        { action: 'add', id: 'user:app', fields: [] },
        { action: 'remove', id: 'directory:/srv/app', fields: [] },
      ],
    });
  });

  it("name a user's password hash as changed, never its value", () => {
    const before: Resource = { type: 'user', name: 'app', password: '$6$a$old', comment: 'App' };
    expect(diffDeclarations([before], [{ ...before, password: '$6$b$new', comment: 'The app' }]).changes).toEqual([
      { action: 'change', id: 'user:app', fields: [{ field: 'password' }, { field: 'comment', from: 'App', to: 'The app' }] },
    ]);
  });

  it('notice a reorder, which changes the digest but no resource', () => {
    expect(diffDeclarations([app, motd], [motd, app])).toEqual({ changes: [], reordered: true });
  });

  it('name the commands a change runs and the services it restarts, and nothing a change does not touch', () => {
    const ini: Resource = { type: 'file', path: '/etc/app.ini', content: 'port = 80\n' };
    const reload: Resource = { type: 'command', name: 'reload', run: ['app', 'reload'], onChange: ['file:/etc/app.ini', 'file:/etc/motd'] };
    const migrate: Resource = { type: 'command', name: 'migrate', run: ['app', 'migrate'], onChange: ['directory:/srv/app'] };
    const web: Resource = { type: 'service', name: 'app', enabled: true, restartOn: ['/etc/app.ini'] };
    const base = [app, motd, ini, reload, migrate, web];
    const changed = diffDeclarations(base, [app, motd, { ...ini, content: 'port = 81\n' }, reload, migrate, web]);
    expect(changed.triggers).toEqual([
      { id: 'command:reload', action: 'run', by: ['file:/etc/app.ini'] },
      { id: 'service:app', action: 'restart', by: ['file:/etc/app.ini'] },
    ]);
    const plan: PlanResult = { base: 'a'.repeat(40), head: 'b'.repeat(40), nodes: [{ node: 'web-1', because: ['nodes/web/app.yaml'], ...changed, last: { outcome: 'applied', lastContact: null, commit: null, signature: 'valid', eligible: true } }], summary: 'touches 1 node', notes: [] };
    expect(formatPlanText(plan, new Date()).split('\n').filter((l) => l.startsWith('  →'))).toEqual(['  → command:reload runs (file:/etc/app.ini changes)', '  → service:app restarts (file:/etc/app.ini changes)']);
    expect(formatPlanMarkdown(plan)).toContain('- **runs** `command:reload` (`file:/etc/app.ini` changes)\n- **restarts** `service:app` (`file:/etc/app.ini` changes)');
    // A removed command is said to do nothing, as the host does nothing for it.
    expect(describeFields({ action: 'remove', id: 'command:reload', fields: [] })).toBe('it owns nothing: removing it runs nothing');
    // A change that no command or service watches sets nothing off; a removed resource neither.
    expect(diffDeclarations(base, [app, motd, ini, reload, migrate, web, nginx]).triggers).toBeUndefined();
    expect(diffDeclarations(base, [motd, ini, { ...migrate, onChange: [] }, web]).triggers).toBeUndefined();
    // A service's declared unit file that changed is read again (daemon-reload), unless restartOn restarts it anyway.
    const unit: Resource = { type: 'file', path: '/etc/systemd/system/app.service', content: '[Service]\nExecStart=/bin/app\n' };
    const newUnit = { ...unit, content: '[Service]\nExecStart=/bin/app --fast\n' };
    const reloaded = diffDeclarations([unit, ...base], [newUnit, ...base]);
    expect(reloaded.triggers).toEqual([{ id: 'service:app', action: 'reload', by: ['file:/etc/systemd/system/app.service'] }]);
    const both = { ...plan, nodes: [{ ...plan.nodes[0]!, ...reloaded }] };
    expect(formatPlanText(both, new Date()).split('\n').filter((l) => l.startsWith('  →'))).toEqual(['  → service:app daemon-reloads (file:/etc/systemd/system/app.service changes)']);
    expect(diffDeclarations([unit, ...base], [newUnit, app, motd, { ...ini, content: 'port = 81\n' }, reload, migrate, web]).triggers).toContainEqual({ id: 'service:app', action: 'restart', by: ['file:/etc/app.ini'] });
    const dropIn: Resource = { type: 'file', path: '/etc/systemd/system/app.service.d/env.conf', content: '[Service]\nEnvironment=A=1\n' };
    expect(diffDeclarations(base, [...base, dropIn]).triggers).toEqual([{ id: 'service:app', action: 'reload', by: ['file:/etc/systemd/system/app.service.d/env.conf'] }]);
  });

  it('name the services a change reloads (reloadOn), unless their restartOn restarts them anyway', () => {
    const site: Resource = { type: 'file', path: '/etc/nginx/sites-enabled/app', content: 'server {}\n' };
    const conf: Resource = { type: 'file', path: '/etc/nginx/nginx.conf', content: 'events {}\n' };
    const nginxService: Resource = { type: 'service', name: 'nginx', running: true, restartOn: ['/etc/nginx/nginx.conf'], reloadOn: ['/etc/nginx/sites-enabled/app'] };
    const base = [site, conf, nginxService];
    const reloaded = diffDeclarations(base, [{ ...site, content: 'server { listen 80; }\n' }, conf, nginxService]);
    expect(reloaded.triggers).toEqual([{ id: 'service:nginx', action: 'reload-service', by: ['file:/etc/nginx/sites-enabled/app'] }]);
    const plan: PlanResult = { base: 'a'.repeat(40), head: 'b'.repeat(40), nodes: [{ node: 'web-1', because: ['nodes/web/nginx.yaml'], ...reloaded, last: { outcome: 'applied', lastContact: null, commit: null, signature: 'valid', eligible: true } }], summary: 'touches 1 node', notes: [] };
    expect(formatPlanText(plan, new Date()).split('\n').filter((l) => l.startsWith('  →'))).toEqual(['  → service:nginx reloads (file:/etc/nginx/sites-enabled/app changes)']);
    const both = diffDeclarations(base, [{ ...site, content: 'server { listen 80; }\n' }, { ...conf, content: 'events { }\n' }, nginxService]);
    expect(both.triggers).toEqual([{ id: 'service:nginx', action: 'restart', by: ['file:/etc/nginx/nginx.conf'] }]);
  });
});

describe('rollout classification', () => {
  const report = (over: Partial<Report>): Report => ({
    format: 1, node: 'n', generation: 1, nodeKey: 'k', vouch: 'v', hostVersion: '0.1.0', sequence: 2, previous: null,
    observedAt: '2026-01-01T00:00:00.000Z', kind: 'reconcile', commit: 'c2', digest: null, outcome: 'applied', errors: [], resources: [], owned: [], ...over,
  });
  const valid = (r: Partial<Report>): VerifiedReport => ({ signature: 'valid', report: report(r) });
  // c1 → c2 → c3 on main; c0 is before the commit under review.
  const atOrAfter = (c: string) => ['c1', 'c2', 'c3'].includes(c);

  it('count a later commit as applied or failed, an earlier one as outstanding, and never a report that does not verify', () => {
    const reports = new Map<string, VerifiedReport>([
      ['exact', valid({ commit: 'c1' })],
      ['skipped', valid({ commit: 'c3' })],
      ['broke-later', valid({ commit: 'c3', outcome: 'failed', resources: [{ id: 'file:/x', result: 'failed', error: 'disk full' }] })],
      ['behind', valid({ commit: 'c0' })],
      ['forged', { signature: 'invalid', reason: 'signature does not verify', report: report({ commit: 'c1' }) }],
      ['fresh', valid({ commit: 'c2', kind: 'enrolment', outcome: 'enrolled' })],
    ]);
    const r = classify('c1', [...reports.keys(), 'silent'], reports, atOrAfter);
    expect(r.applied.map((a) => [a.node, a.later])).toEqual([['exact', false], ['skipped', true]]);
    expect(r.failed).toEqual([{ node: 'broke-later', reason: '1 resource failed', commit: 'c3', lastContact: '2026-01-01T00:00:00.000Z', later: true, errors: ['file:/x: disk full'] }]);
    expect(r.outstanding).toEqual([
      { node: 'behind', lastContact: '2026-01-01T00:00:00.000Z', commit: 'c0' },
      { node: 'forged', lastContact: null, commit: null, reason: "its last report's signature is invalid: signature does not verify" },
      { node: 'fresh', lastContact: '2026-01-01T00:00:00.000Z', commit: 'c2', reason: 'enrolled at c2, not applied yet' },
    ]);
    expect(r.unknown).toEqual(['silent']); // never reported: neither failed nor outstanding
  });

  it('judge a node by the report it made at the commit: a later failure is a note; an identical declaration at another commit counts as applied', () => {
    const reports = new Map<string, VerifiedReport>([
      ['broke-later', valid({ commit: 'c3', outcome: 'failed' })],
      ['same-elsewhere', valid({ commit: 'c0', digest: 'sha256:d' })],
      ['other-elsewhere', valid({ commit: 'c0', digest: 'sha256:e' })],
    ]);
    const r = classify('c1', [...reports.keys()], reports, atOrAfter, new Map(), {
      appliedBefore: new Map([['broke-later', report({ commit: 'c1' })]]),
      sameDeclaration: (_node, rep) => rep.digest === 'sha256:d',
    });
    expect(r.applied).toEqual([
      { node: 'broke-later', commit: 'c1', lastContact: '2026-01-01T00:00:00.000Z', later: false, note: 'later failed at c3' },
      { node: 'same-elsewhere', commit: 'c0', lastContact: '2026-01-01T00:00:00.000Z', later: false },
    ]);
    expect(r.failed).toEqual([]);
    expect(r.outstanding.map((o) => o.node)).toEqual(['other-elsewhere']);
  });

  it('use the newest earlier report that verifies when the last one does not', () => {
    const reports = new Map<string, VerifiedReport>([['n', { signature: 'invalid', reason: 'x', report: report({ commit: 'c3' }) }]]);
    const r = classify('c1', ['n'], reports, atOrAfter, new Map([['n', report({ commit: 'c2' })]]));
    expect(r.applied).toEqual([{ node: 'n', commit: 'c2', lastContact: '2026-01-01T00:00:00.000Z', later: true }]);
  });
});

describe('the exit code of status', () => {
  const row = (over: Partial<NodeStatus>): NodeStatus => ({
    node: 'n', lastContact: 't', commit: 'tip', outcome: 'applied', hostVersion: '0.1.0', signature: 'valid', generation: 1, sequence: 2, eligible: true, chain: 'ok', signer: null, trust: 'signed', ...over,
  });

  it('is 0 when every node applied the tip, 4 while some have not (or never reported), 1 when one failed or does not verify; retired and revoked nodes never set it', () => {
    expect(statusExit([row({}), row({ node: 'm' })], 'tip')).toBe(0);
    expect(statusExit([row({}), row({ node: 'm', commit: 'old' })], 'tip')).toBe(4);
    expect(statusExit([row({}), row({ node: 'm', signature: 'missing', outcome: null, commit: null })], 'tip')).toBe(4);
    expect(statusExit([row({}), row({ node: 'm', outcome: 'enrolled' })], 'tip')).toBe(4);
    expect(statusExit([row({ commit: 'old' }), row({ node: 'm', outcome: 'failed' })], 'tip')).toBe(1);
    expect(statusExit([row({}), row({ node: 'm', outcome: 'untrusted' })], 'tip')).toBe(1);
    expect(statusExit([row({}), row({ node: 'm', signature: 'invalid', outcome: null })], 'tip')).toBe(1);
    expect(statusExit([row({}), row({ node: 'm', chain: 'forked' })], 'tip')).toBe(1);
    expect(statusExit([row({}), row({ node: 'm', outcome: 'retired', commit: 'old' }), row({ node: 'r', signature: 'revoked', outcome: null })], 'tip')).toBe(0);
  });
});
