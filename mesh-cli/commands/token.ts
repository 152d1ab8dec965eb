/**
 * `mesh-cli token issue NODE [--group PATH]`: bump the node's generation, record the token's
 * public half and expiry in the node's node.yaml (wherever the node sits under nodes/; a new
 * node goes in nodes/PATH/NODE/, or nodes/NODE/ without a group), commit, and hand back the token file — printed once,
 * never stored. Pushing the commit is what makes the token valid (deploy is `git push`),
 * and it revokes every earlier identity of the node; the earlier token keys stay listed
 * (`previous`) so that the node's earlier reports remain verifiable as revoked.
 *
 * The token also carries the fleet's trusted signer keys (the host's first trusted set) and
 * the node's own git credential: 32 random bytes, of which node.yaml keeps only the sha256,
 * which is what `mesh-cli serve` checks, and its SHA-256-crypt, which a web server in front of
 * the repository checks (docs/servers.md). A new token replaces the credential, and with it
 * revokes the old one on the embedded server as soon as the commit is pushed.
 */
import { closeSync, existsSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { stringify } from 'yaml';
import { machineRefusal, MeshError } from '../../core/errors.js';
import { encodePrivateKey, generateKeyPair, sshPublicKey } from '../../core/sign/sshsig.js';
import { HTTP_URL, NODE_NAME, NodeIdentity } from '../../schema/fleet.js';
import { loadYamlOrThrow } from '../../core/load.js';
import { MAX_GROUP_DEPTH, NODES, readLayout } from '../../core/fleet/layout.js';
import { shardOf } from '../../core/report/shard.js';
import { TokenFile } from '../../schema/token.js';
import { tokenCheck } from '../../core/token-check.js';
import { commitChange, originUrl, type Fleet } from '../fleet.js';
import { notANode, placeOfNode } from '../layout.js';
import { checkOutFile } from '../out-file.js';
import { tokenPin } from '../tls.js';
import { workingTree } from '../tree.js';
import { newSecret, passwordHash } from '../server/operators.js';
import { shaCrypt } from '../../core/access/sha-crypt.js';

/**
 * Names a node may not have: the server's operator (whose name a node's login would collide
 * with), the branch words (main, HEAD in any case, reports, refs) and the server's routes
 * (packages, info, objects, the git services). NODE_NAME already refuses upper case, so HEAD is
 * listed as `head`.
 */
export const RESERVED_NODE_NAMES = ['operator', 'anonymous', 'main', 'master', 'head', 'reports', 'refs', 'heads', 'packages', 'info', 'objects', 'git-upload-pack', 'git-receive-pack', 'mesh'];

export interface IssuedToken {
  token: TokenFile;
  text: string;
  commit: string;
}

/** Issue a token for `node` in `fleet`: a new node goes in the group `group` (a path of group names, e.g. web/eu), an existing one stays where it is. */
export async function issueToken(fleet: Fleet, node: string, opts: { url?: string; expiresMs: number; now: Date; credential?: boolean; group?: string; mirrors?: string[]; out?: string }): Promise<IssuedToken> {
  if (!NODE_NAME.test(node)) throw new MeshError('E_BAD_NODE', `'${node}' is not a valid node name: use lower-case letters, digits and -, at most 63 characters`);
  if (RESERVED_NODE_NAMES.includes(node)) {
    throw new MeshError('E_RESERVED_NODE', `'${node}' is a reserved name (${RESERVED_NODE_NAMES.join(', ')}): a node so named could never log in to the fleet server or would be mistaken for a branch or a route of it; choose another name`);
  }
  const url = withoutCredentials(opts.url ?? (await fleetUrl(fleet)));
  for (const [what, u] of [['the fleet', url], ...(opts.mirrors ?? []).map((m) => ['a mirror', m])] as const) hostsCanUse(u, what, opts.url === undefined && u === url);
  const tlsPin = await tokenPin(fleet.dir, url);
  const password = opts.credential === false ? null : newSecret();
  const found = await readIdentity(fleet, node);
  const dir = found ? sameGroup(node, found.dir, opts.group) : await newNodeDir(fleet, node, opts.group);
  const previous = found?.identity ?? null;
  const keys = generateKeyPair();
  const expires = new Date(opts.now.getTime() + opts.expiresMs).toISOString();
  // A fresh identity: a retired node comes back, and the previous token key is kept for verifying its reports.
  const identity: NodeIdentity = {
    node,
    generation: (previous?.generation ?? 0) + 1,
    token: { publicKey: sshPublicKey(keys.publicKey, `token-${node}`), issuedAt: opts.now.toISOString(), expires },
    ...earlierKeys(previous),
    ...(password ? { credential: { sha256: passwordHash(password), crypt: shaCrypt(password) } } : {}),
  };
  const shards = fleet.config.reports?.shards;
  const reports = shards ? withoutCredentials(shards[shardOf(node, shards.length)]!) : null;
  const token: TokenFile = {
    kind: 'mesh-token',
    version: 1,
    url,
    ...(opts.mirrors?.length ? { mirrors: opts.mirrors.map(withoutCredentials) } : {}),
    ...(reports ? { reports } : {}),
    node,
    generation: identity.generation,
    secret: encodePrivateKey(keys.privateKey),
    expires,
    signers: fleet.config.signers.map((s) => `${s.key.split(/\s+/).slice(0, 2).join(' ')} ${s.name}`),
    trust: fleet.config.trust,
    mainBranch: fleet.config.mainBranch,
    ...(tlsPin ? { tlsPin } : {}),
    ...(password ? { credential: { username: node, password } } : {}),
  };
  // The check goes second in the file (after kind and version): a file cut short anywhere below loses fields it covers.
  const { kind, version, ...fields } = token;
  const checked: TokenFile = { kind, version, check: tokenCheck(TokenFile.parse(token)), ...fields };
  const head = `# mesh enrolment token for ${node}: carry it to the machine and run\n#   mesh-host enrol --token-file FILE\n# It holds secrets (the token key${password ? " and the node's git credential" : ''}): keep it private and delete it once used.\n# It is shown once, expires ${expires}, and is valid once the commit `;
  const tail = ` is pushed${reports ? ` and main is synced to its report shard ${reports} (mesh-cli mirror sync)` : ''}.\n${stringify(checked)}`;
  // With --out the file is written before the commit (a disk too full for it commits nothing), the commit's id put in its place after.
  const staged = opts.out === undefined ? null : stageTokenFile(opts.out, head, tail);
  const change = () => writeIdentity(fleet, identity, 'token issue', dir);
  let commit: string;
  try {
    commit = await commitChange(fleet.dir, [identityFile(fleet, dir)], `token: issue ${node} generation ${identity.generation}`, change, (id) => staged?.settle(id));
  } catch (e) {
    staged?.discard();
    throw e;
  }
  return { token: checked, text: `${head}${commit.slice(0, 12)}${tail}`, commit };
}

/** A token file written beside its name, to take the name once the commit that issues it exists. */
interface StagedTokenFile {
  /** Put the commit's id in its place, sync, and give the file its name (refusing one taken meanwhile). */
  settle(commit: string): void;
  /** Remove the file: nothing was issued. */
  discard(): void;
}

/**
 * Write the token's text to a hidden file beside `out` (mode 0600) and sync it, with the commit's
 * 12 characters left blank between `head` and `tail`: filling them in later rewrites bytes already
 * written, which needs no new space. A failure here is before the commit: nothing is issued.
 */
function stageTokenFile(out: string, head: string, tail: string): StagedTokenFile {
  const partial = join(dirname(out), `.${basename(out)}.${process.pid}.partial`);
  const at = Buffer.byteLength(head);
  let fd: number | null = null;
  const discard = () => {
    if (fd !== null) closeSync(fd);
    fd = null;
    rmSync(partial, { force: true });
  };
  const refused = (e: unknown, after: string) => {
    const refusal = machineRefusal(e);
    const full = refusal !== null && refusal !== 'is read-only';
    return new MeshError('E_TOKEN_OUT', `cannot write the token to ${out}: ${(e as Error).message}${full ? ': free space there, then issue it again' : ''}; ${after}`, { next: full ? 'retry' : 'human', cause: e });
  };
  try {
    fd = openSync(partial, 'wx', 0o600);
    writeSync(fd, `${head}${' '.repeat(12)}${tail}`);
    fsyncSync(fd);
  } catch (e) {
    discard();
    throw refused(e, 'nothing was committed');
  }
  return {
    settle(commit) {
      try {
        writeSync(fd!, commit.slice(0, 12), at);
        fsyncSync(fd!);
        closeSync(fd!);
        fd = null;
        linkSync(partial, out);
      } catch (e) {
        discard();
        throw refused(e, 'its commit is taken back');
      }
      rmSync(partial, { force: true });
    },
    discard,
  };
}

/** `url` without a user name or password in it: the operator's credential never goes into a token. */
export function withoutCredentials(url: string): string {
  try {
    const u = new URL(url);
    if (!u.username && !u.password) return url;
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return url;
  }
}

/** `node`'s identity and folder (wherever it sits under nodes/ in the checkout), or null when it has none. */
export async function readIdentity(fleet: Fleet, node: string): Promise<{ identity: NodeIdentity; dir: string } | null> {
  const place = await placeOfNode(workingTree(fleet.dir), node);
  if (!place) return null;
  const file = `${place.dir}/node.yaml`;
  return { identity: loadYamlOrThrow(readFileSync(join(fleet.dir, file), 'utf8'), file, NodeIdentity), dir: place.dir };
}

/** The identity and folder of an existing node (retire, revoke): a MeshError when the fleet has no such node. */
export async function existingIdentity(fleet: Fleet, node: string): Promise<{ identity: NodeIdentity; dir: string }> {
  const found = await readIdentity(fleet, node);
  if (!found) throw notANode(node, (await readLayout(workingTree(fleet.dir))).nodes.keys());
  return found;
}

/** The path of `dir`/node.yaml (dir: the node's folder, e.g. nodes/web/web-1). */
export function identityFile(fleet: Fleet, dir: string): string {
  return join(fleet.dir, dir, 'node.yaml');
}

/** Write `dir`/node.yaml for `identity` (by the mesh-cli command `by`). */
export function writeIdentity(fleet: Fleet, identity: NodeIdentity, by: string, dir: string): void {
  mkdirSync(join(fleet.dir, dir), { recursive: true });
  writeFileSync(identityFile(fleet, dir), `# written by mesh-cli ${by}; do not edit by hand\n${stringify(identity, { lineWidth: 0 })}`);
}

/** The folder of an existing node at `dir`, when `group` (if given) is where it is; moving a node is the operator's git mv. */
function sameGroup(node: string, dir: string, group: string | undefined): string {
  if (group === undefined) return dir;
  const wanted = group === '' ? `${NODES}/${node}` : `${NODES}/${groupPath(group)}/${node}`;
  if (wanted === dir) return dir;
  throw new MeshError('E_NODE_ELSEWHERE', `${node} is already a node, in ${dir}/, not in ${wanted}/: moving a node between groups is a git move (git mv ${dir} ${wanted}, then commit); drop --group to issue its token where it is`);
}

/** Where a new node goes: nodes/GROUP/NODE/ (nodes/NODE/ without a group), checked against the checkout. */
async function newNodeDir(fleet: Fleet, node: string, group: string | undefined): Promise<string> {
  const tree = workingTree(fleet.dir);
  const path = group === undefined || group === '' ? '' : groupPath(group);
  const parts = path === '' ? [] : path.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const dir = `${NODES}/${parts.slice(0, i).join('/')}`;
    if ((await tree.list(dir))?.includes('node.yaml')) throw new MeshError('E_BAD_GROUP', `${dir}/ is a node (it holds node.yaml), so it cannot hold other nodes: --group names groups, folders under nodes/ without node.yaml`);
  }
  const dir = path === '' ? `${NODES}/${node}` : `${NODES}/${path}/${node}`;
  // The folder may already hold the node's declaration files; a folder holding folders is a group, and stays one.
  const inside = await tree.folders(dir);
  if (inside.length > 0) throw new MeshError('E_BAD_GROUP', `${dir}/ is a group (it holds the folder${inside.length === 1 ? '' : 's'} ${inside.map((f) => `${f}/`).join(', ')}), so it cannot become the node ${node}: a node holds no folders; choose another name for the node`);
  return dir;
}

/** `group` checked: group names joined by /, each a valid name, at most MAX_GROUP_DEPTH deep. */
function groupPath(group: string): string {
  if (group === '') return '';
  const parts = group.split('/');
  const bad = parts.find((p) => !NODE_NAME.test(p));
  if (bad !== undefined) throw new MeshError('E_BAD_GROUP', `--group ${group}: '${bad}' is not a valid group name: a group path is group names joined by / (e.g. web/eu), each lower-case letters, digits and -, as node names are`);
  if (parts.length > MAX_GROUP_DEPTH) throw new MeshError('E_BAD_GROUP', `--group ${group}: groups nest at most ${MAX_GROUP_DEPTH} deep`);
  return group;
}

/** The token keys of every generation up to and including `identity`'s, as the next generation's `previous`. */
export function earlierKeys(identity: NodeIdentity | null): Pick<NodeIdentity, 'previous'> {
  const keys = [...(identity?.previous ?? []), ...(identity?.token ? [{ generation: identity.generation, publicKey: identity.token.publicKey }] : [])];
  return keys.length > 0 ? { previous: keys } : {};
}

/**
 * What `token issue` refuses before it commits anything: a token expired when it is printed
 * (`--expires 0`, which other tools read as "never"), or one whose file cannot be written (a folder
 * that does not exist, a file already there), would spend a generation and leave a token no one has.
 */
export function checkIssueOptions(o: { out?: string; expiresMs: number }): void {
  if (o.expiresMs < 1000) throw new MeshError('E_USAGE', "--expires must be at least 1s: a token always expires (0 is not 'never'), and must stay valid while it is carried to its machine (the default is 24h); nothing was committed");
  if (o.out === undefined) return;
  checkOutFile(o.out, '--out');
  if (existsSync(o.out)) throw new MeshError('E_TOKEN_OUT', `--out ${o.out} already exists: a token is written once, to a new file: remove the old one or name another; nothing was committed`);
}

/** A note for a token valid longer than a month: a copy left behind stays usable that long. */
export function longLifeNote(expiresMs: number): string | null {
  const days = expiresMs / 86_400_000;
  return days > 30 ? `note: this token is valid for ${Math.round(days)} days; it is a secret carried by hand, so a life of hours (the default is 24h) limits what a copy left behind can do` : null;
}

/**
 * Refuse, before anything is written, a URL the host could not use (a path, an ssh or scp-like
 * address): the token would be carried to the machine only to fail there.
 */
function hostsCanUse(url: string, what: string, fromOrigin: boolean): void {
  if (HTTP_URL.test(url)) return;
  const where = fromOrigin ? `${what}'s URL is origin's, '${url}'` : `${what}'s URL is '${url}'`;
  throw new MeshError('E_BAD_URL', `hosts fetch and push over HTTP(S) only, and ${where}: pass --url with the http:// or https:// URL hosts will use (the one mesh-cli serve prints, or your git server's HTTPS address); nothing was written`);
}

async function fleetUrl(fleet: Fleet): Promise<string> {
  const url = await originUrl(fleet.dir);
  if (!url) throw new MeshError('E_NO_URL', "the fleet checkout has no 'origin' remote: pass --url with the URL hosts will use");
  return url;
}
