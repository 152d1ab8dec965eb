// The benchmark's workload, identical for mesh and cf-agent: N `file` resources (a few lines
// of content, mode 0644) spread over N/10 `directory` resources (mode 0755) directly under
// /srv of a private root, and the drift made before each drift-repair run (10% of the files
// get other content, another 5% are deleted).
import { existsSync, mkdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** The hostname of every bench machine (its /etc/hostname), which the templated workload reads as a fact. */
export const HOSTNAME = 'bench-host';
/** The variable the templated workload reads (the bundle's vars.yaml). */
export const VARS = { port: 8080 };

/**
 * The resources of a workload of `n` files: directories first, then files, in declared order.
 * With `templated`, every file is `template: true` and its content reads a variable, a fact
 * and a loop; it renders to exactly the literal workload's content, so both leave the same
 * machine and only the declaring differs.
 */
export function workload(n, { templated = false } = {}) {
  const dirs = Math.max(1, Math.round(n / 10));
  const resources = [];
  for (let d = 0; d < dirs; d++) resources.push({ type: 'directory', path: `/srv/d${d}`, mode: '0755' });
  for (let i = 0; i < n; i++) {
    const literal = `# file ${i}\nname=f${i}\nvalue=${(i * 7919) % 1000}\nport=${VARS.port}\nhost=${HOSTNAME}\nworkers=1,2,3\n`;
    const template = `# file ${i}\nname=f${i}\nvalue=${(i * 7919) % 1000}\nport={{ vars.port }}\nhost={{ facts.hostname }}\nworkers={% for w in (1..3) %}{{ w }}{% unless forloop.last %},{% endunless %}{% endfor %}\n`;
    resources.push({ type: 'file', path: `/srv/d${i % dirs}/f${i}.conf`, content: literal, ...(templated ? { template } : {}), mode: '0644' });
  }
  return resources;
}

/** A mesh bundle folder declaring `resources` (a templated file's body is its template), with the variables it reads. */
export function writeMeshBundle(dir, resources) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'base.yaml'), declarationYaml(resources));
  writeFileSync(join(dir, 'vars.yaml'), Object.entries(VARS).map(([k, v]) => `${k}: ${v}\n`).join(''));
}

/** The declaration file for `resources`. */
export function declarationYaml(resources) {
  const lines = ['resources:'];
  for (const r of resources) {
    lines.push(`  - type: ${r.type}`, `    path: ${r.path}`, `    mode: "${r.mode}"`);
    if (r.template !== undefined) lines.push('    template: true', `    content: ${JSON.stringify(r.template)}`);
    else if (r.content !== undefined) lines.push(`    content: ${JSON.stringify(r.content)}`);
  }
  return lines.join('\n') + '\n';
}

/**
 * A CFEngine policy making the same promises on the machine rooted at `root`: a `files:`
 * promise per directory (create, perms) and per file (create, content, perms). `content` is
 * CFEngine's own way to declare a whole file's content (3.16+), like mesh's.
 */
export function writeCfPolicy(file, root, resources) {
  const str = (s) => '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\$/g, '$(const.dollar)').replace(/\n/g, '$(const.n)') + '"';
  const out = ['body common control', '{', '  bundlesequence => { "mesh_bench" };', '}', 'body perms m(mode)', '{', '  mode => "$(mode)";', '  rxdirs => "false";', '}', 'bundle agent mesh_bench', '{', '  files:'];
  for (const r of resources) {
    const path = r.type === 'directory' ? `${root}${r.path}/.` : `${root}${r.path}`;
    out.push(`    ${str(path)}`, '      create => "true",');
    if (r.content !== undefined) out.push(`      content => ${str(r.content)},`);
    out.push(`      perms => m("${r.mode.slice(1)}");`);
  }
  out.push('}');
  writeFileSync(file, out.join('\n') + '\n');
}

/** Roots freshRoot has moved aside in this process (their names in the trash). */
let trashed = 0;

/**
 * A new, empty machine root (the folders every Debian machine has). A root already at `root`
 * is moved into `.trash/` beside it rather than deleted: on ext4 without a journal every file
 * made in the next minutes would pay for its deleted files (bench-run.mjs `settleDeletes`).
 * The trash goes with the bench's work folder, when the bench ends.
 */
export function freshRoot(root) {
  if (existsSync(root)) {
    const trash = join(dirname(root), '.trash');
    mkdirSync(trash, { recursive: true });
    renameSync(root, join(trash, `${basename(root)}-${++trashed}`));
  }
  for (const d of ['etc', 'srv', 'var/lib', 'tmp']) mkdirSync(join(root, d), { recursive: true });
  writeFileSync(join(root, 'etc/hostname'), `${HOSTNAME}\n`);
}

/** Drift on the files of `resources` under `root`: every 10th file changed, every 20th (offset by 5) deleted. */
export function makeDrift(root, resources) {
  const files = resources.filter((r) => r.type === 'file');
  let changed = 0;
  let deleted = 0;
  files.forEach((r, i) => {
    if (i % 10 === 0) (writeFileSync(join(root, r.path), 'drifted\n'), changed++);
    else if (i % 20 === 5) (unlinkSync(join(root, r.path)), deleted++);
  });
  return { changed, deleted };
}
