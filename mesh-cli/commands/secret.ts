/**
 * `mesh-cli secret set NAME [--level PATH]`, `secret show NAME [--level PATH] --identity FILE`,
 * `secret rekey --identity FILE`: the fleet's secrets, as armored age blocks in secrets.yaml at
 * nodes/ (fleet-wide), a group's folder or a node's (PATH as for `token issue --group`).
 *
 * `set` reads the value from stdin only (an argument would land in shell history and `ps`), and
 * encrypts it to every node at or below PATH, by the recipient its newest verified report names,
 * and to the operators in mesh.yaml. `rekey` re-encrypts every secret whose list is not exactly
 * that any more (a node re-enrolled, joined or left), with an operator's identity, all or
 * nothing. Both write the files through the yaml Document API (comments and order kept) and,
 * like `set`, leave the commit to the operator.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { isMap, parseDocument, Scalar, YAMLMap, type Document } from 'yaml';
import { MeshError } from '../../core/errors.js';
import { readLayout } from '../../core/fleet/layout.js';
import { decryptWith, encryptTo, parseIdentityFile } from '../../core/secrets/age.js';
import { layerSecrets, readSecrets, SECRETS_FILE, type PlacedSecret } from '../../core/secrets/levels.js';
import { sameRecipients, wantedRecipients, type CurrentRecipients } from '../../core/secrets/recipients.js';
import type { SecretRecipient } from '../../schema/secrets.js';
import { VAR_NAME } from '../../schema/vars.js';
import { openFleet, type Fleet } from '../fleet.js';
import { tryFetchReports } from '../reports.js';
import { allSecrets, currentRecipients } from '../secrets.js';
import { workingTree } from '../tree.js';

/** The folder of `--level PATH` (nodes/ without one); it must be a group or a node of the checkout. */
async function levelDir(fleet: Fleet, path: string | undefined): Promise<string> {
  if (path === undefined || path === '' || path === '.') return 'nodes';
  const clean = path.replace(/^nodes\//, '').replace(/\/+$/, '');
  const layout = await readLayout(workingTree(fleet.dir));
  if (layout.groups.includes(clean)) return `nodes/${clean}`;
  const node = [...layout.nodes.values()].find((p) => p.dir === `nodes/${clean}` || p.node === clean);
  if (node) return node.dir;
  throw new MeshError('E_SECRET_LEVEL', `--level ${path} is neither a group nor a node under nodes/ in this checkout: give a group path (e.g. db or web/eu) or a node's name`, { next: 'human' });
}

/** Each node's current recipient, fetched first (a failed fetch uses what was fetched before, and says so). */
async function recipientsNow(fleet: Fleet, fetch: boolean, warn: (line: string) => void): Promise<CurrentRecipients> {
  const note = fetch ? await tryFetchReports(fleet) : null;
  if (note) warn(note);
  return (await currentRecipients(fleet)) ?? new Map();
}

/** What a secret at `level` is encrypted to now, with a warning naming every node left out. */
async function recipientsFor(fleet: Fleet, level: string, current: CurrentRecipients, warn: (line: string) => void): Promise<SecretRecipient[]> {
  const layout = await readLayout(workingTree(fleet.dir));
  const operators = fleet.config.operators?.recipients ?? [];
  const { recipients, missing } = wantedRecipients(level, layout.nodes, current, operators);
  if (missing.length > 0) warn(`${missing.join(', ')} ${missing.length === 1 ? 'has' : 'have'} not reported an age recipient yet (not enrolled, or not reported since): left out; run 'mesh-cli secret rekey' once ${missing.length === 1 ? 'it has' : 'they have'}`);
  if (recipients.length === 0) throw new MeshError('E_SECRET_NO_RECIPIENTS', `nobody could read this secret: no node at or below ${level}/ has reported a recipient, and mesh.yaml names no operators.recipients`, { next: 'human' });
  return recipients;
}

/** The secrets.yaml at `level` as a Document (a new one when there is none). */
function openFile(fleet: Fleet, level: string): { path: string; doc: Document.Parsed } {
  const path = join(fleet.dir, level, SECRETS_FILE);
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) throw new MeshError('E_SECRET_FILE', `${level}/${SECRETS_FILE} is not valid YAML (${doc.errors[0]!.message.split('\n')[0]}): fix it first`, { next: 'human' });
  if (doc.contents === null) (doc as Document).contents = new YAMLMap();
  if (!isMap(doc.contents)) throw new MeshError('E_SECRET_FILE', `${level}/${SECRETS_FILE} is not a map of secret names to entries`, { next: 'human' });
  return { path, doc };
}

/** Put `name`'s entry into `doc`: its recipients and its armored block (a literal block scalar). */
function putEntry(doc: Document, name: string, recipients: SecretRecipient[], block: string): void {
  const value = new Scalar(block.endsWith('\n') ? block : `${block}\n`);
  value.type = Scalar.BLOCK_LITERAL;
  const entry = doc.createNode({ recipients: recipients.map((r) => ({ ...r })) }) as YAMLMap;
  for (const item of (entry.get('recipients', true) as YAMLMap | undefined)?.items ?? []) (item as unknown as { flow: boolean }).flow = true;
  entry.set('value', value);
  doc.setIn([name], entry);
}

/** secrets.yaml's text: each recipient on one line (`- { node: web-1, recipient: age1… }`), however long. */
function fileText(doc: Document): string {
  return doc.toString({ lineWidth: 0 });
}

/** Encrypt `value` as secret `name` at `level` and write it. */
export async function setSecret(fleet: Fleet, name: string, value: string, opts: { level?: string; fetch: boolean; warn: (line: string) => void }): Promise<{ file: string; recipients: SecretRecipient[] }> {
  if (!VAR_NAME.test(name)) throw new MeshError('E_SECRET_NAME', `'${name}' is not a secret name: letters, digits and _ (not starting with a digit), as templates read it: {{ secrets.NAME }}`, { next: 'human' });
  const level = await levelDir(fleet, opts.level);
  const recipients = await recipientsFor(fleet, level, await recipientsNow(fleet, opts.fetch, opts.warn), opts.warn);
  if (!recipients.some((r) => 'operator' in r)) {
    opts.warn(`no operator can read ${name} back (mesh.yaml names no operators.recipients): when a node is enrolled again or joins ${level}/, set it again with 'mesh-cli secret set'; with an operator recipient, 'mesh-cli secret rekey' does it`);
  }
  const { path, doc } = openFile(fleet, level);
  putEntry(doc, name, recipients, await encryptTo(recipients.map((r) => r.recipient), value));
  writeFileSync(path, fileText(doc));
  return { file: `${level}/${SECRETS_FILE}`, recipients };
}

/** The operator identity in `file`. */
function readOperatorIdentity(file: string): Promise<string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new MeshError('E_SECRET_IDENTITY', `cannot read the identity file ${file}: give an age identity (age-keygen -o FILE) whose recipient is in mesh.yaml operators.recipients`, { next: 'human' });
  }
  return parseIdentityFile(text).then((id) => {
    if (!id) throw new MeshError('E_SECRET_IDENTITY', `${file} holds no age identity (an AGE-SECRET-KEY-1… line)`, { next: 'human' });
    return id.identity;
  });
}

/** The plaintext of `name` at `level` (or, without a level, as the fleet-wide file holds it). */
export async function showSecret(fleet: Fleet, name: string, identityFile: string, level?: string): Promise<string> {
  const dir = await levelDir(fleet, level);
  const file = `${dir}/${SECRETS_FILE}`;
  const text = await workingTree(fleet.dir).read(file);
  const read = text === null ? null : readSecrets(text, file);
  if (read && !read.ok) throw new MeshError('E_SECRET_FILE', `${file} does not read: ${read.problems[0]?.message}`, { next: 'human' });
  const placed = read?.ok ? layerSecrets([read.entries]).get(name) : undefined;
  if (!placed) throw new MeshError('E_SECRET_UNKNOWN', `${file} holds no secret ${name}${level ? '' : ' (give --level for a group or node secret)'}`, { next: 'human' });
  const value = await decryptWith(await readOperatorIdentity(identityFile), placed.entry.value);
  if (value === null) throw new MeshError('E_SECRET_IDENTITY', `secret ${name} is not encrypted to the identity in ${identityFile}: is its recipient in mesh.yaml operators.recipients, and was the secret set or rekeyed since?`, { next: 'human' });
  return value;
}

/** One secret rekey re-encrypted. */
export interface Rekeyed {
  file: string;
  name: string;
  added: string[];
  removed: string[];
}

/** Re-encrypt every secret whose recipients are not its nodes' current ones plus the operators; every file is written, or none. */
export async function rekey(fleet: Fleet, identityFile: string, opts: { fetch: boolean; warn: (line: string) => void }): Promise<Rekeyed[]> {
  const identity = await readOperatorIdentity(identityFile);
  const current = await recipientsNow(fleet, opts.fetch, opts.warn);
  const { layout, byFile, problems } = await allSecrets(workingTree(fleet.dir));
  if (problems.length > 0) throw new MeshError('E_SECRET_FILE', `${problems[0]!.file}:${problems[0]!.line}:${problems[0]!.col}: ${problems[0]!.message}`, { next: 'human' });
  const operators = fleet.config.operators?.recipients ?? [];
  const changed: Rekeyed[] = [];
  const writes: { path: string; text: string }[] = [];
  const missingWarned = new Set<string>();
  for (const [file, entries] of byFile) {
    const stale = entries.map((s) => ({ s, want: wantedRecipients(s.level, layout.nodes, current, operators) })).filter(({ s, want }) => !sameRecipients(s.entry.recipients, want.recipients));
    if (stale.length === 0) continue;
    const { path, doc } = openFile(fleet, file.slice(0, -SECRETS_FILE.length - 1));
    for (const { s, want } of stale) {
      for (const m of want.missing.filter((n) => !missingWarned.has(n))) {
        missingWarned.add(m);
        opts.warn(`${m} has not reported an age recipient yet: left out of its secrets`);
      }
      if (want.recipients.length === 0) throw new MeshError('E_SECRET_NO_RECIPIENTS', `${s.file}:${s.line}:${s.col}: nobody could read secret ${s.name} after a rekey (no recipient at or below ${s.level}/, no operators): nothing written`, { next: 'human' });
      const value = await decryptWith(identity, s.entry.value).catch(() => null);
      if (value === null) throw new MeshError('E_SECRET_IDENTITY', `${s.file}:${s.line}:${s.col}: secret ${s.name} is not encrypted to the identity in ${identityFile}, so it cannot be re-encrypted: nothing written. Set it again with 'mesh-cli secret set ${s.name}${s.level === 'nodes' ? '' : ` --level ${s.level.slice('nodes/'.length)}`}'`, { next: 'human' });
      putEntry(doc, s.name, want.recipients, await encryptTo(want.recipients.map((r) => r.recipient), value));
      const names = (l: SecretRecipient[]) => l.map((r) => ('node' in r ? r.node : `operator ${r.operator}`) + ` ${r.recipient.slice(0, 12)}…`);
      const before = new Set(names(s.entry.recipients));
      const after = new Set(names(want.recipients));
      changed.push({ file, name: s.name, added: [...after].filter((n) => !before.has(n)), removed: [...before].filter((n) => !after.has(n)) });
    }
    writes.push({ path, text: fileText(doc) });
  }
  for (const w of writes) writeFileSync(w.path, w.text); // every re-encryption succeeded: now write them all
  return changed;
}

/** Read all of stdin; a terminal is refused (the value would echo, and sit in the scrollback). */
async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) throw new MeshError('E_SECRET_STDIN', "secret set reads the value from stdin, never from an argument or a terminal: pipe it in, e.g. 'mesh-cli secret set NAME < file' or 'pass show db | mesh-cli secret set NAME'", { next: 'human' });
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  const value = Buffer.concat(chunks).toString('utf8');
  if (value === '') throw new MeshError('E_SECRET_STDIN', 'stdin was empty: pipe the value in, e.g. \'mesh-cli secret set NAME < file\'', { next: 'human' });
  return value;
}

/** Register `secret set|show|rekey`. */
export function secretCommand(program: Command): void {
  const secret = program.command('secret').description("the fleet's secrets: age-encrypted to the nodes that need them and to the operators");
  const warn = (line: string) => console.error(`warning: ${line}`);
  secret
    .command('set')
    .description('encrypt the value read from stdin as NAME for every node at or below --level (and the operators); writes secrets.yaml, commit it yourself')
    .argument('<name>', 'the secret name templates read as {{ secrets.NAME }}')
    .option('--level <path>', 'a group path (e.g. db, web/eu) or a node; none: fleet-wide (nodes/secrets.yaml)')
    .option('--no-fetch', 'use the report branches already fetched')
    .option('--json', 'print {file, name, recipients} as JSON')
    .action(async (name: string, o: { level?: string; fetch: boolean; json?: boolean }) => {
      const fleet = await openFleet(process.cwd());
      const value = await readStdin();
      const set = await setSecret(fleet, name, value, { level: o.level, fetch: o.fetch, warn });
      if (o.json) return void console.log(JSON.stringify({ file: set.file, name, recipients: set.recipients }));
      console.log(`${set.file}: ${name} encrypted to ${set.recipients.map((r) => ('node' in r ? r.node : `operator ${r.operator}`)).join(', ')}; commit and push it`);
    });
  secret
    .command('show')
    .description('decrypt NAME with an operator identity and print it to stdout')
    .argument('<name>', 'the secret name')
    .requiredOption('--identity <file>', "an operator's age identity file (age-keygen's format)")
    .option('--level <path>', 'where the secret is set: a group path or a node; none: fleet-wide')
    .action(async (name: string, o: { identity: string; level?: string }) => {
      process.stdout.write(await showSecret(await openFleet(process.cwd()), name, o.identity, o.level));
    });
  secret
    .command('rekey')
    .description("re-encrypt every secret whose recipients are not its nodes' current ones plus the operators (all or nothing); commit the files yourself")
    .requiredOption('--identity <file>', "an operator's age identity file, to decrypt what is re-encrypted")
    .option('--no-fetch', 'use the report branches already fetched')
    .option('--json', 'print [{file, name, added, removed}] as JSON')
    .action(async (o: { identity: string; fetch: boolean; json?: boolean }) => {
      const changed = await rekey(await openFleet(process.cwd()), o.identity, { fetch: o.fetch, warn });
      if (o.json) return void console.log(JSON.stringify(changed));
      if (changed.length === 0) return void console.log('every secret is encrypted to its nodes\' current recipients and the operators: nothing to do');
      for (const c of changed) console.log(`${c.file}: ${c.name} re-encrypted${c.added.length ? `; added ${c.added.join(', ')}` : ''}${c.removed.length ? `; removed ${c.removed.join(', ')}` : ''}`);
      console.log('commit and push them; old commits still hold the old blocks (a departed node can open those): change the value with secret set where that matters');
    });
}
