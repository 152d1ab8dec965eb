/**
 * A push's ref updates read in-process. A receive-pack POST begins with its commands, one
 * pkt-line each ("old new ref", the first followed by NUL and the client's capabilities), up to a
 * flush; the pack follows. `serve` reads them before starting git, decides them with the rules of
 * core/access/rules.ts and either answers a refusal itself, as receive-pack would after a
 * pre-receive hook said no, or hands git the request unchanged, the bytes it read first included.
 */
import { Readable } from 'node:stream';
import type { RefUpdate } from '../../core/access/rules.js';
import { pktLine } from '../../core/git/pkt-line.js';

/** The most bytes of commands read before the pack (a node pushes one ref; an operator a few hundred refs at most). */
export const MAX_COMMANDS = 1024 * 1024;

/** A push's commands and its body again, unread. */
export interface PushCommands {
  updates: RefUpdate[];
  capabilities: string[];
  /** How many bytes the commands took, their flush included: the pack (or push options) follows. */
  headLength: number;
  /** Whether the client named shallow commits (a push from a shallow clone). */
  shallow: boolean;
  body: Readable;
}

/** Read the commands at the head of `stream`; null when they do not parse (or run past MAX_COMMANDS). */
export async function readPushCommands(stream: AsyncIterable<Buffer>): Promise<PushCommands | null> {
  const chunks = stream[Symbol.asyncIterator]();
  const read: Buffer[] = [];
  let head = Buffer.alloc(0);
  for (;;) {
    const parsed = parseCommands(head);
    if (parsed === 'broken' || head.length > MAX_COMMANDS) return null;
    if (parsed !== 'more') {
      const rest = { [Symbol.asyncIterator]: () => chunks };
      const body = Readable.from((async function* () { yield* read; yield* rest; })(), { objectMode: false });
      // A client gone mid-pack fails this stream; its response's close stops git (backend.ts), so nothing more is owed.
      body.on('error', () => {});
      return { ...parsed, body };
    }
    const next = await chunks.next();
    if (next.done) return null;
    read.push(next.value);
    head = Buffer.concat([head, next.value]);
  }
}

/** The commands in `buf` up to the first flush; 'more' when the flush is not in yet. */
function parseCommands(buf: Buffer): Omit<PushCommands, 'body'> | 'more' | 'broken' {
  const updates: RefUpdate[] = [];
  let capabilities: string[] = [];
  let shallow = false;
  for (let at = 0; ; ) {
    if (at + 4 > buf.length) return 'more';
    const len = parseInt(buf.toString('latin1', at, at + 4), 16);
    if (!/^[0-9a-f]{4}$/.test(buf.toString('latin1', at, at + 4))) return 'broken';
    if (len === 0) return { updates, capabilities, headLength: at + 4, shallow }; // none at all: git's probe before a large push ("0000")
    if (len < 4) return 'broken';
    if (at + len > buf.length) return 'more';
    let line = buf.toString('utf8', at + 4, at + len).replace(/\n$/, '');
    at += len;
    if (line.startsWith('shallow ')) {
      shallow = true;
      continue;
    }
    const nul = line.indexOf('\0');
    if (nul >= 0) {
      capabilities = line.slice(nul + 1).split(' ').filter(Boolean);
      line = line.slice(0, nul);
    }
    const m = /^([0-9a-f]{40,64}) ([0-9a-f]{40,64}) (\S+)$/.exec(line);
    if (!m) return 'broken';
    updates.push({ old: m[1]!, new: m[2]!, ref: m[3]! });
  }
}

/**
 * receive-pack's answer to a push a pre-receive hook refused: each refusal on the side band's
 * channel 2 (where git prints "remote: …"), then the report: every ref "ng" (a hook's refusal
 * refuses the whole push), with its own reason when it has one.
 */
export function refusalResult(updates: RefUpdate[], capabilities: string[], refused: Map<string, string>): Buffer {
  const report = updates.map((u) => `ng ${u.ref} ${refused.get(u.ref) ?? 'another ref of this push was refused'}`);
  return receiveResult(report, capabilities, [...refused.values()].map((why) => `mesh: ${why}`));
}

/** receive-pack's answer to a push whose every ref was updated. */
export function acceptedResult(updates: RefUpdate[], capabilities: string[]): Buffer {
  return receiveResult(updates.map((u) => `ok ${u.ref}`), capabilities, []);
}

/**
 * receive-pack's answer, framed as the client asked: `messages` on the side band's channel 2,
 * then the report ("unpack ok" and a line per ref), in pkt-lines when it asked for report-status,
 * on channel 1 when it asked for a side band.
 */
function receiveResult(refLines: string[], capabilities: string[], messages: string[]): Buffer {
  const report = ['unpack ok\n', ...refLines.map((line) => `${line}\n`)];
  const reportStatus = capabilities.includes('report-status') || capabilities.includes('report-status-v2');
  const sideBand = capabilities.includes('side-band-64k') || capabilities.includes('side-band');
  const status = reportStatus ? report.map(pktLine).join('') + '0000' : '';
  if (!sideBand) return Buffer.from(status);
  const band = (channel: number, text: string) => pktLine(String.fromCharCode(channel) + text);
  const told = messages.map((message) => band(2, `${message}\n`)).join('');
  const max = capabilities.includes('side-band-64k') ? 65515 : 995;
  let data = '';
  for (let at = 0; at < status.length; at += max) data += band(1, status.slice(at, at + max));
  return Buffer.from(told + data + '0000');
}
