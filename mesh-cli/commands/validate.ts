/**
 * `mesh-cli validate [--format text|github|json] [--rev REV]`: check every declaration in
 * the fleet repo, as CI does on every pull request. By default it checks the working tree
 * (what is on disk, committed or not: in CI that is the checkout under review); `--rev`
 * checks a commit from git objects instead. Every problem names file:line:column; the
 * github format prints them as Actions annotations. Exit 1 on any problem.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { MeshError, type Problem } from '../../core/errors.js';
import { openFleet, topOf, type Fleet } from '../fleet.js';
import { git } from '../git.js';
import { eligibility, lastReports, mainRef, reportedNodes, trusted, tryFetchReports } from '../reports.js';
import { commitTree, resolveCommit, workingCommit, workingTree, type FleetTree } from '../tree.js';
import { reviewTrust, trustLines, type TrustReview } from '../trust-review.js';
import { checkSecretRecipients, checkTree, type Checked } from '../validate-checks.js';
import { currentRecipients } from '../secrets.js';

type Format = 'text' | 'github' | 'json';

/** Validate the fleet at `fleet.dir` (working tree, or `rev`), with reports for the eligibility check. */
export async function validateFleet(fleet: Fleet, opts: { rev?: string; fetch: boolean }): Promise<Checked & { notes: string[]; trust?: TrustReview }> {
  const result = await checkFleet(fleet, opts);
  const trust = await trustAgainstMain(fleet, opts.rev);
  return trust ? { ...result, trust } : result;
}

/**
 * What the change under validation does to trust, against main as fetched: mesh.yaml's trust and
 * signers, and the commits since main that the hosts would refuse on their own signature. Nothing
 * when there is no fetched main, or nothing to say.
 */
async function trustAgainstMain(fleet: Fleet, rev?: string): Promise<TrustReview | null> {
  const main = await git(fleet.dir, ['rev-parse', '--verify', '--quiet', mainRef(fleet)]).then((o) => o.trim(), () => '');
  if (!main) return null;
  const head = rev ? await resolveCommit(fleet.dir, rev) : await workingCommit(fleet.dir).catch(() => null);
  if (!head) return null;
  const review = await reviewTrust(fleet.dir, main, head, rev === undefined);
  return trustLines(review).length > 0 ? review : null;
}

async function checkFleet(fleet: Fleet, opts: { rev?: string; fetch: boolean }): Promise<Checked & { notes: string[] }> {
  const notes: string[] = [];
  const tree = opts.rev ? await commitTree(fleet.dir, await resolveCommit(fleet.dir, opts.rev)) : workingTree(fleet.dir);
  const fetchNote = opts.fetch ? await tryFetchReports(fleet) : null;
  if (fetchNote) notes.push(fetchNote);
  const checked = await checkEligibility(fleet, tree, notes);
  // Who can read each secret, from the recipient lists and the recipients the nodes report now.
  const secrets = await checkSecretRecipients(tree, checked.readsSecrets, await currentRecipients(fleet));
  return { ...checked, problems: [...checked.problems, ...secrets.problems], notes: [...checked.notes, ...secrets.notes] };
}

async function checkEligibility(fleet: Fleet, tree: FleetTree, notes: string[]): Promise<Checked & { notes: string[] }> {
  const first = await checkTree(tree);
  if (first.withResources.length === 0) return { ...first, notes };
  if ((await reportedNodes(fleet)).length === 0) {
    notes.push('no reports fetched: skipped the check that ineligible nodes are given no resources');
    return { ...first, notes };
  }
  const reports = await lastReports(fleet, first.withResources);
  const ineligible = new Map<string, string>();
  for (const [node, v] of reports) {
    const e = eligibility(trusted(v));
    if (e.eligible === false) ineligible.set(node, `its last report says it is ineligible (${e.reason})`);
  }
  return { ...(ineligible.size ? await checkTree(tree, ineligible) : first), notes };
}

/** GitHub Actions workflow commands: `::error file=F,line=L,col=C::message` (`::warning` for warnings), escaped as the runner expects. */
export function githubAnnotations(problems: Problem[], notes: string[], warnings: Problem[] = []): string[] {
  const data = (s: string) => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
  const prop = (s: string) => data(s).replace(/:/g, '%3A').replace(/,/g, '%2C');
  return [
    ...problems.map((p) => `::error file=${prop(p.file)},line=${p.line},col=${p.col}::${data(p.message)}`),
    ...warnings.map((p) => `::warning file=${prop(p.file)},line=${p.line},col=${p.col}::${data(p.message)}`),
    ...notes.map((n) => `::notice::${data(n)}`),
  ];
}

function report(result: Checked & { notes: string[]; trust?: TrustReview }, format: Format): void {
  const { problems, notes, warnings, trust } = result;
  if (format === 'json') {
    console.log(JSON.stringify({ ok: problems.length === 0, ...(trust ? { trust } : {}), problems, ...(warnings.length ? { warnings } : {}), notes, nodes: result.nodes, roles: result.roles }));
    return;
  }
  // What the change does to trust comes first: it matters more than any declaration.
  const trustText = trust ? trustLines(trust) : [];
  if (format === 'github') {
    if (trustText.length) console.log(`::warning file=mesh.yaml,title=trust::${trustText.join('\n').replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A')}`);
    for (const line of githubAnnotations(problems, notes, warnings)) console.log(line);
  } else {
    for (const line of trustText) console.log(line);
    for (const p of problems) console.log(`${p.file}:${p.line}:${p.col}: ${p.message}`);
    for (const p of warnings) console.log(`${p.file}:${p.line}:${p.col}: warning: ${p.message}`);
    for (const n of notes) console.error(`note: ${n}`);
  }
  const files = new Set(problems.map((p) => p.file)).size;
  const what = `${result.nodes} node${result.nodes === 1 ? '' : 's'}, ${result.roles} role${result.roles === 1 ? '' : 's'}`;
  console.error(problems.length ? `${problems.length} problem${problems.length === 1 ? '' : 's'} in ${files} file${files === 1 ? '' : 's'} (${what} checked)` : `valid: ${what}, mesh.yaml`);
}

/** Register `validate` on `program`. */
export function validateCommand(program: Command): void {
  program.command('validate')
    .description('check every declaration, role, node.yaml and mesh.yaml; --format github prints annotations')
    .option('--format <format>', 'text, github or json', formatOption, 'text')
    .option('--json', 'same as --format json')
    .option('--rev <rev>', 'check this commit instead of the working tree')
    .option('--no-fetch', 'use the report branches already fetched (for the eligibility check)')
    .action(async (o: { format: Format; json?: boolean; rev?: string; fetch: boolean }) => {
      // A missing or broken mesh.yaml is a problem to report with the others, not a reason to stop.
      const fleet = await openFleet(process.cwd()).catch((e: unknown) => openLoosely(process.cwd(), e));
      const result = await validateFleet(fleet, { rev: o.rev, fetch: o.fetch });
      report(result, o.json ? 'json' : o.format);
      if (result.problems.length > 0) process.exitCode = 1;
    });
}

/** The checkout without reading mesh.yaml (main branch assumed `main`), or the original error outside a checkout. */
async function openLoosely(cwd: string, error: unknown): Promise<Fleet> {
  const dir = await topOf(cwd);
  if (!dir || !(error instanceof MeshError)) throw error;
  return { dir, config: { name: '', mainBranch: 'main', trust: 'signed', signers: [] } };
}

function formatOption(text: string): Format {
  if (!['text', 'github', 'json'].includes(text)) throw new InvalidArgumentError('use text, github or json');
  return text as Format;
}
