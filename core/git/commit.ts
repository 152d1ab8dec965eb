/**
 * A git commit object read byte for byte, the way `git verify-commit` reads it: the headers,
 * the message, and the signature in the `gpgsig` header. What a signature covers is the
 * commit without that header (continuation lines included), so the payload is rebuilt from
 * the raw bytes rather than from parsed fields. isomorphic-git's readCommit().payload cannot
 * be used for this: it assumes an OpenPGP signature and garbles an SSH one.
 */

/** A commit object larger than this is refused unread: a real one is a few hundred bytes. */
export const MAX_COMMIT_BYTES = 256 * 1024;

export interface CommitObject {
  tree: string;
  parents: string[];
  /** The exact bytes the signature is made over: the commit without its gpgsig header. */
  payload: Buffer;
  /** The armored signature, or null when the commit is not signed. */
  signature: string | null;
  /** `ssh` (SSHSIG), `pgp` (OpenPGP, which mesh does not check), `other`, or `none`. */
  signatureKind: 'ssh' | 'pgp' | 'other' | 'none';
  message: string;
}

export type ParsedCommit = { ok: true; commit: CommitObject } | { ok: false; reason: string };

/** Parse a raw commit object (its content, without the "commit <size>\0" prefix). Never throws. */
export function parseCommitObject(raw: Uint8Array): ParsedCommit {
  if (!(raw instanceof Uint8Array)) return { ok: false, reason: 'a commit object must be bytes' };
  if (raw.length > MAX_COMMIT_BYTES) return { ok: false, reason: `the commit object is larger than ${MAX_COMMIT_BYTES} bytes` };
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('latin1'); // one char per byte: offsets stay byte offsets
  const end = text.indexOf('\n\n');
  const head = end < 0 ? text : text.slice(0, end);
  const lines = head.split('\n');
  const kept: string[] = [];
  const sig: string[] = [];
  let inSig = false;
  let tree: string | null = null;
  const parents: string[] = [];
  for (const [i, line] of lines.entries()) {
    if (line.startsWith(' ')) {
      if (i === 0) return { ok: false, reason: 'the commit starts with a continuation line' };
      if (inSig) sig.push(line.slice(1));
      else kept.push(line);
      continue;
    }
    inSig = false;
    const space = line.indexOf(' ');
    const key = space < 0 ? line : line.slice(0, space);
    const value = space < 0 ? '' : line.slice(space + 1);
    if (key === 'gpgsig') {
      if (sig.length > 0) return { ok: false, reason: 'the commit has two gpgsig headers' };
      inSig = true;
      sig.push(value);
      continue;
    }
    if (key === 'tree') tree = value;
    if (key === 'parent') parents.push(value);
    kept.push(line);
  }
  if (tree === null || !/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(tree)) return { ok: false, reason: 'the commit has no valid tree header' };
  if (parents.some((p) => !/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(p))) return { ok: false, reason: 'the commit has a malformed parent header' };
  const rest = end < 0 ? '' : text.slice(end);
  const payload = Buffer.from(kept.join('\n') + rest, 'latin1');
  const signature = sig.length > 0 ? Buffer.from(sig.join('\n') + '\n', 'latin1').toString('utf8') : null;
  const message = Buffer.from(end < 0 ? '' : text.slice(end + 2), 'latin1').toString('utf8');
  return { ok: true, commit: { tree, parents, payload, signature, signatureKind: kindOf(signature), message } };
}

function kindOf(signature: string | null): CommitObject['signatureKind'] {
  if (signature === null) return 'none';
  if (signature.startsWith('-----BEGIN SSH SIGNATURE-----')) return 'ssh';
  if (signature.startsWith('-----BEGIN PGP SIGNATURE-----')) return 'pgp';
  return 'other';
}

/** The values of trailer `key` ("Key: value" lines) in the last paragraph of a commit message. */
export function trailers(message: string, key: string): string[] {
  const paragraphs = message.trimEnd().split(/\n\s*\n/);
  const last = paragraphs.length > 1 ? paragraphs[paragraphs.length - 1]! : '';
  const prefix = key.toLowerCase() + ':';
  return last
    .split('\n')
    .filter((l) => l.toLowerCase().startsWith(prefix))
    .map((l) => l.slice(prefix.length).trim());
}

/** What status needs of a commit: its tree, its parents and its message. */
export interface CommitHeaders {
  tree: string;
  parents: string[];
  message: string;
}

const OID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/**
 * A commit's tree, parents and message, read from the headers that come first (git writes tree,
 * then parents, then the rest) without rebuilding the signed payload: for reading thousands of
 * report commits. SHA-1 and SHA-256 ids. Null when it has no valid tree header. Never throws.
 */
export function commitHeaders(raw: Uint8Array): CommitHeaders | null {
  if (!(raw instanceof Uint8Array) || raw.length > MAX_COMMIT_BYTES) return null;
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  const end = buf.indexOf('\n\n');
  const headEnd = end < 0 ? buf.length : end;
  let tree: string | null = null;
  const parents: string[] = [];
  for (let at = 0; at < headEnd;) {
    const eol = Math.min(headEnd, (buf.indexOf(10, at) + 1 || headEnd + 1) - 1);
    const line = buf.toString('latin1', at, eol);
    at = eol + 1;
    if (tree === null) {
      if (!line.startsWith('tree ')) return null;
      tree = line.slice(5);
    } else if (line.startsWith('parent ')) parents.push(line.slice(7));
    else break;
  }
  if (tree === null || !OID.test(tree) || parents.some((p) => !OID.test(p))) return null;
  return { tree, parents, message: end < 0 ? '' : buf.toString('utf8', end + 2) };
}
