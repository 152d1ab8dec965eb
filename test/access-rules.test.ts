/**
 * The access rules of core/access, as every git server applies them (mesh-cli serve in-process,
 * mesh-cli hook elsewhere): who may update which ref, what a node's new commits may hold, a
 * token enrolling once; how serve reads a push's ref updates and answers a refusal; and the SHA-256-crypt form of a node credential that Apache reads.
 */
import { describe, expect, it } from 'vitest';
import { MAX_REPORT_FILE, pusherOf, refusedNodePush, refusedRefs, type EnrolmentRecords, type PushReader } from '../core/access/rules.js';
import { shaCrypt, shaCryptMatches } from '../core/access/sha-crypt.js';
import { readPushCommands, refusalResult } from '../mesh-cli/server/push-commands.js';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const ZERO = '0'.repeat(40);
const MAIN = 'refs/heads/main';

describe('the ref rules', () => {
  const operator = pusherOf('alice', true, null);
  const node = pusherOf('web-1', false, 3);
  const stranger = pusherOf('mallory', false, null);

  it('an operator may push anything but deleting main', () => {
    expect(refusedRefs(operator, [
      { old: A, new: B, ref: MAIN }, { old: A, new: ZERO, ref: 'refs/heads/other' }, { old: ZERO, new: B, ref: 'refs/tags/v1' },
      { old: A, new: B, ref: 'refs/heads/reports/web-2' },
    ], MAIN)).toEqual([]);
    expect(refusedRefs(operator, [{ old: A, new: ZERO, ref: MAIN }], MAIN)).toEqual(["mesh: refs/heads/main is the fleet's main branch; it cannot be deleted"]);
  });

  it('a node may push its own report branch only, non-fast-forward included, and delete nothing', () => {
    expect(node).toEqual({ user: 'web-1', role: 'node', generation: 3 });
    expect(refusedRefs(node, [{ old: A, new: B, ref: 'refs/heads/reports/web-1' }, { old: ZERO, new: B, ref: 'refs/heads/reports/web-1' }], MAIN)).toEqual([]);
    expect(refusedRefs(node, [
      { old: A, new: B, ref: MAIN }, { old: A, new: B, ref: 'refs/heads/reports/web-2' }, { old: ZERO, new: B, ref: 'refs/tags/v1' },
      { old: A, new: ZERO, ref: 'refs/heads/reports/web-1' },
    ], MAIN)).toEqual([
      'mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/main',
      'mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/reports/web-2',
      'mesh: node web-1 may push only refs/heads/reports/web-1, not refs/tags/v1',
      'mesh: node web-1 may not delete its report branch',
    ]);
  });

  it('anyone else pushes nothing', () => {
    expect(refusedRefs(stranger, [{ old: A, new: B, ref: 'refs/heads/reports/mallory' }], MAIN)).toEqual(['mesh: push refused: mallory is neither an operator nor a node of this fleet']);
  });
});

describe("a node's new commits", () => {
  const node = { user: 'web-1', role: 'node' as const, generation: 2 };
  const reader = (commits: Record<string, { files: Array<{ path: string; size: number }>; status?: string }>): PushReader => ({
    newCommits: async () => Object.keys(commits),
    files: async (c) => commits[c]!.files,
    statusJson: async (c) => commits[c]!.status ?? null,
  });
  const records = (): EnrolmentRecords & { claimed: string[] } => {
    const claimed: string[] = [];
    return { claimed, claim: async (n, g) => (claimed.includes(`${n}.${g}`) ? { first: false, at: '2026-01-02T03:04:05Z' } : (claimed.push(`${n}.${g}`), { first: true })) };
  };

  it('hold no file over the cap', async () => {
    const small = reader({ [A]: { files: [{ path: 'status.json', size: MAX_REPORT_FILE }] } });
    expect(await refusedNodePush(node, A, small, records())).toBeNull();
    const big = reader({ [A]: { files: [{ path: 'status.json', size: 10 }] }, [B]: { files: [{ path: 'status.json', size: MAX_REPORT_FILE + 1 }] } });
    expect(await refusedNodePush(node, A, big, records())).toBe(`mesh: report ${B} of web-1 holds status.json (1048577 bytes), over the limit of 1048576 bytes per file; the push is refused`);
  });

  it('enrol with a token once per (node, generation)', async () => {
    const enrol = reader({ [A]: { files: [], status: JSON.stringify({ kind: 'enrolment' }, null, 2) } });
    const plain = reader({ [A]: { files: [], status: JSON.stringify({ kind: 'pass' }, null, 2) } });
    const kept = records();
    expect(await refusedNodePush(node, A, plain, kept)).toBeNull();
    expect(kept.claimed).toEqual([]);
    expect(await refusedNodePush(node, A, enrol, kept)).toBeNull();
    expect(kept.claimed).toEqual(['web-1.2']);
    expect(await refusedNodePush(node, A, enrol, kept)).toBe(
      "mesh: the token of web-1 generation 2 was already used: it enrolled a machine at 2026-01-02T03:04:05Z. A token enrols one machine once; issue a new one with 'mesh-cli token issue web-1'");
    expect(await refusedNodePush({ ...node, generation: 3 }, A, enrol, kept)).toBeNull();
  });
});

describe('SHA-256-crypt', () => {
  it('matches glibc crypt(3) (values from Python crypt.crypt on Debian 12)', () => {
    expect(shaCrypt('hello world', 'saltstring')).toBe('$5$rounds=1000$saltstring$QtBkNwIcMnUwAFJKs302JYS6/Bh1ZRatTU0nvk51P96');
    expect(shaCrypt('x'.repeat(70), 'abcdefghijklmnop')).toBe('$5$rounds=1000$abcdefghijklmnop$FLkf5EPMThS2YWz8w0WqIdr8tYWNynYDclugInXS3C7');
  });

  it('a new hash has its own salt and checks only its password', () => {
    const one = shaCrypt('secret');
    expect(one).toMatch(/^\$5\$rounds=1000\$[./0-9A-Za-z]{16}\$[./0-9A-Za-z]{43}$/);
    expect(shaCrypt('secret')).not.toBe(one);
    expect(shaCryptMatches('secret', one)).toBe(true);
    expect(shaCryptMatches('secreT', one)).toBe(false);
  });
});

describe("serve reads a push's ref updates before git starts", () => {
  const pkt = (line: string) => (Buffer.byteLength(line) + 4).toString(16).padStart(4, '0') + line;
  const chunks = async function* (...parts: string[]) { for (const p of parts) yield Buffer.from(p); };
  const drain = async (r: NodeJS.ReadableStream) => { const out: Buffer[] = []; for await (const c of r) out.push(c as Buffer); return Buffer.concat(out).toString('latin1'); };

  it('reads the commands across chunks and hands the whole body on unread', async () => {
    const head = pkt(`${ZERO} ${B} refs/heads/reports/web-1\0report-status side-band-64k agent=git/2.39\n`) + pkt(`${A} ${ZERO} refs/heads/x\n`) + '0000';
    const push = await readPushCommands(chunks(head.slice(0, 30), head.slice(30), 'PACK'));
    expect(push && { updates: push.updates, capabilities: push.capabilities }).toEqual({
      updates: [{ old: ZERO, new: B, ref: 'refs/heads/reports/web-1' }, { old: A, new: ZERO, ref: 'refs/heads/x' }],
      capabilities: ['report-status', 'side-band-64k', 'agent=git/2.39'],
    });
    expect(await drain(push!.body)).toBe(head + 'PACK');
  });

  it("git's probe before a large push (a flush alone) and shallow lines pass; anything else is not a push", async () => {
    expect((await readPushCommands(chunks('0000')))?.updates).toEqual([]);
    expect((await readPushCommands(chunks(pkt(`shallow ${A}\n`) + pkt(`${A} ${B} refs/heads/main\0report-status\n`) + '0000')))?.updates).toEqual([{ old: A, new: B, ref: 'refs/heads/main' }]);
    expect(await readPushCommands(chunks('GET / HTTP/1.1\r\n'))).toBeNull();
    expect(await readPushCommands(chunks(pkt(`${A} ${B}\n`) + '0000'))).toBeNull();
    expect(await readPushCommands(chunks(pkt(`${A} ${B} refs/heads/main\n`)))).toBeNull(); // ended before its flush
  });

  it('a client gone mid-pack ends the body without an unhandled error', async () => {
    const cut = async function* () { yield Buffer.from(pkt(`${A} ${B} refs/heads/main\0report-status\n`) + '0000PA'); throw new Error('aborted'); };
    const push = await readPushCommands(cut());
    push!.body.resume();
    await new Promise((resolve) => push!.body.once('close', resolve));
    expect(push!.body.destroyed).toBe(true);
  });

  it('a refusal is answered as receive-pack answers a pre-receive hook that said no', () => {
    const updates = [{ old: A, new: B, ref: 'refs/heads/main' }, { old: A, new: B, ref: 'refs/heads/reports/web-1' }];
    const refused = new Map([['refs/heads/main', 'node web-1 may push only refs/heads/reports/web-1, not refs/heads/main']]);
    expect(refusalResult(updates, ['report-status'], refused).toString()).toBe(
      pkt('unpack ok\n') + pkt('ng refs/heads/main node web-1 may push only refs/heads/reports/web-1, not refs/heads/main\n') +
      pkt('ng refs/heads/reports/web-1 another ref of this push was refused\n') + '0000');
    const banded = refusalResult(updates, ['report-status', 'side-band-64k'], refused).toString();
    expect(banded).toBe(pkt('\x02mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/main\n') +
      pkt('\x01' + refusalResult(updates, ['report-status'], refused).toString()) + '0000');
  });
});
