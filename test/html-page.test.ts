/**
 * The status page as a person sees it: a served fleet whose three hosts ran the built mesh-host
 * (after the last commit web-1 applied it, web-2 failed it, web-3 has not run; web-2 had applied
 * the commit before), `mesh-cli status --html`, and the page rendered by a real browser (Debian's
 * chromium-headless-shell, as `scripts/install-deps.sh` installs it). The page's own script writes
 * each row's lowest text/background contrast into the DOM; the test reads it from `--dump-dom`,
 * once with the page parsed as HTML and once as XHTML.
 */
import { execFile } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, createFleet, hostCmd, type TestFleet } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const CHROMIUM = 'chromium-headless-shell';
const tmp = tempDirs();

const motd = (text: string, extra = '') => `resources:\n  - type: file\n    path: /etc/motd\n    content: "${text}\\n"\n${extra}`;
const BROKEN = '  - type: file\n    path: /srv/missing/app.conf\n    content: "x\\n"\n';

/** The page's DOM once a browser has loaded it and run its script, as `--dump-dom` prints it. Hermetic: no network, a profile of its own. */
function renderedDom(page: string): Promise<string> {
  const profile = tmp('mesh-chromium-');
  const args = ['--headless', '--no-sandbox', '--disable-gpu', `--user-data-dir=${profile}`, '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-extensions', '--host-resolver-rules=MAP * ~NOTFOUND', '--dump-dom', pathToFileURL(page).href];
  const env = { ...process.env, HOME: profile, TMPDIR: profile, XDG_CONFIG_HOME: profile, XDG_CACHE_HOME: profile };
  return new Promise((resolve, reject) =>
    execFile(CHROMIUM, args, { env, timeout: 90_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${CHROMIUM} did not render ${page} (scripts/install-deps.sh installs it): ${err.message}\n${stderr}`)) : resolve(stdout)));
}

interface Row {
  cls: string;
  contrast: number;
  colours: string;
  text: string;
}

/** Every table row and bar segment of a dumped DOM: its class, the contrast and colours the page's script wrote, and the text a person reads. */
function readDom(dom: string, names: Record<string, string>): { rows: Row[]; segments: Row[] } {
  const attr = (attrs: string, name: string) => new RegExp(`\\b${name}="([^"]*)"`).exec(attrs)?.[1] ?? '';
  const text = (html: string) => html.replace(/<[^>]+>/g, ' ').replace(/&amp;/g, '&').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/\s+/g, ' ').trim();
  const named = (s: string) => Object.entries(names).reduce((t, [name, sha]) => t.replaceAll(sha.slice(0, 12), `<${name}>`), s).replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/g, '<time>').replace(/\d+[smhd] ago/g, '<age> ago');
  const row = (attrs: string, inner: string): Row => ({ cls: attr(attrs, 'class'), contrast: Number(attr(attrs, 'data-contrast')), colours: attr(attrs, 'data-colours'), text: named(text(inner)) });
  return {
    rows: [...dom.matchAll(/<tr\b([^>]*)>([\s\S]*?)<\/tr>/g)].map((m) => row(m[1]!, m[2]!)),
    segments: [...dom.matchAll(/<span\b([^>]*)>([^<]*)<\/span>/g)].filter((m) => /class="(applied|failed|unverified|outstanding)"/.test(m[1]!)).map((m) => row(m[1]!, m[2]!)),
  };
}

/** WCAG relative luminance of "#rrggbb". */
function luminance(hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255).map((c) => (c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!;
}

describe('the status page in a browser', () => {
  let fleet: TestFleet;
  const commits: Record<string, string> = {};
  const roots: Record<string, string> = {};

  beforeAll(async () => {
    fleet = await createFleet();
    for (const node of ['web-1', 'web-2', 'web-3']) roots[node] = await fleet.enrol(node);
    commits.base = await fleet.commit({ 'nodes/web-1/base.yaml': motd('web-1'), 'nodes/web-2/base.yaml': motd('web-2'), 'nodes/web-3/base.yaml': motd('web-3') }, 'base');
    const runs = await Promise.all(['web-1', 'web-2', 'web-3'].map((node) => hostCmd(roots[node]!, 'run', '--once')));
    expect(runs.map((r) => r.code)).toEqual([0, 0, 0]);
    // web-1 applies the next commit, web-2 fails it (after applying base), web-3 has not run since.
    commits.next = await fleet.commit({ 'nodes/web-1/base.yaml': motd('web-1 v2'), 'nodes/web-2/base.yaml': motd('web-2 v2', BROKEN), 'nodes/web-3/base.yaml': motd('web-3 v2') }, 'next');
    const next = await Promise.all(['web-1', 'web-2'].map((node) => hostCmd(roots[node]!, 'run', '--once')));
    expect(next.map((r) => r.code)).toEqual([0, 1]);
  }, 300_000);
  afterAll(async () => fleet?.close());

  it('every row is readable, the failed node is the loudest, and the old rollout keeps its applied node with a note', async () => {
    const page = join(fleet.dir, 'fleet.html');
    const r = await cli(fleet.checkout, 'status', '--html', page);
    expect(r.code, r.stderr).toBe(1); // web-2 failed its last pass
    const xhtml = join(fleet.dir, 'fleet.xhtml');
    copyFileSync(page, xhtml);
    const [asHtml, asXhtml] = await Promise.all([renderedDom(page), renderedDom(xhtml)]);
    const { rows, segments } = readDom(asHtml, commits);

    expect(rows.length).toBe(2 + 2 + 3); // two headers, two rollouts, three nodes
    for (const x of [...rows, ...segments]) expect.soft(x.contrast, `${x.colours}: ${x.text}`).toBeGreaterThanOrEqual(4.5);
    // Problems loudest (white on deep red), outstanding calmer (dark on amber), healthy quiet (dark on a light tint).
    const node = (name: string) => rows.find((x) => x.text.startsWith(`${name} `))!;
    expect([node('web-2').cls, node('web-3').cls, node('web-1').cls]).toEqual(['problem failed', 'waiting applied', 'ok applied']);
    const background = (x: Row) => luminance(x.colours.split(' on ')[1]!);
    expect(background(node('web-2'))).toBeLessThan(0.2);
    expect(background(node('web-2'))).toBeLessThan(background(node('web-3')));
    expect(background(node('web-3'))).toBeLessThan(background(node('web-1')));
    expect(segments.find((x) => x.cls === 'failed')!.colours).toBe(node('web-2').colours);
    // base's rollout: web-2 applied it, and its later failure is a note, not a red segment.
    const base = rows.find((x) => x.text.startsWith('<base> '))!;
    expect(base.text).toContain('web-2 applied it; later failed at <next>');
    expect(base.text).toContain('3 applied, 0 failed, 0 outstanding of 3');
    expect(rows).toMatchInlineSnapshot(`
      [
        {
          "cls": "",
          "colours": "#222222 on #ffffff",
          "contrast": 15.9,
          "text": "commit subject rollout nodes",
        },
        {
          "cls": "",
          "colours": "#ffffff on #b71c1c",
          "contrast": 6.57,
          "text": "<next> <time> next 1 1 1 web-2 failed: 1 resource failed outstanding: web-3 1 applied, 1 failed, 1 outstanding of 3",
        },
        {
          "cls": "",
          "colours": "#595959 on #ffffff",
          "contrast": 7,
          "text": "<base> <time> base 3 web-2 applied it; later failed at <next> 3 applied, 0 failed, 0 outstanding of 3",
        },
        {
          "cls": "",
          "colours": "#222222 on #ffffff",
          "contrast": 15.9,
          "text": "node last contact commit outcome host signature",
        },
        {
          "cls": "ok applied",
          "colours": "#1a1a1a on #f4faf4",
          "contrast": 16.43,
          "text": "web-1 <time>Z (<age> ago) <next> applied 0.1.0 valid",
        },
        {
          "cls": "problem failed",
          "colours": "#ffffff on #b71c1c",
          "contrast": 6.57,
          "text": "web-2 <time>Z (<age> ago) <next> failed file:/srv/missing/app.conf: the parent directory of /srv/missing/app.conf does not exist: declare it as a directory resource 0.1.0 valid",
        },
        {
          "cls": "waiting applied",
          "colours": "#3d2e00 on #fff4d6",
          "contrast": 12.05,
          "text": "web-3 <time>Z (<age> ago) <base> applied outstanding: has not applied <next> yet 0.1.0 valid",
        },
      ]
    `);
    expect(segments).toMatchInlineSnapshot(`
      [
        {
          "cls": "applied",
          "colours": "#1b3d1f on #c8e6c9",
          "contrast": 9,
          "text": "1",
        },
        {
          "cls": "failed",
          "colours": "#ffffff on #b71c1c",
          "contrast": 6.57,
          "text": "1",
        },
        {
          "cls": "outstanding",
          "colours": "#3d2e00 on #ffe082",
          "contrast": 10.21,
          "text": "1",
        },
        {
          "cls": "applied",
          "colours": "#1b3d1f on #c8e6c9",
          "contrast": 9,
          "text": "3",
        },
      ]
    `);
    // Parsed as XML, the same page draws the same rows with the same colours.
    expect(readDom(asXhtml, commits)).toEqual({ rows, segments });
  });
});
