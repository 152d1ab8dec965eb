/**
 * `file`: content, mode, owner and group of one regular file, or its absence. With `check`, new
 * content is checked by a program where it is staged, before it takes the file's place (as Puppet's
 * validate_cmd): refused, it is removed and the file stays as it was.
 */
import { readFileSync, unlinkSync } from 'node:fs';
import type { FileResource } from '../../schema/declaration.js';
import { MeshError } from '../../core/errors.js';
import { describeOwnership, type NodeState } from './node.js';
import type { ResourceContext } from './handler.js';
import { assertParent, attributeDiff, nodeHandler, normalMode, ownerNeeds } from './node-handler.js';
import { masked, tail } from './program-output.js';

/** Files larger than this are not captured for restore; the host refuses to take them over. */
const MAX_PRIOR_BYTES = 1024 * 1024;

export const fileHandler = nodeHandler<FileResource>('file', {
  withContent: true,
  staged: true,
  should: () => 'a file',
  needs: ownerNeeds,

  diff(r, now) {
    const content = r.content !== undefined && now.content !== Buffer.from(r.content).toString('base64') ? ['content differs'] : [];
    return [...content, ...attributeDiff(r, now)];
  },

  async apply(r, now, real, ctx) {
    if (r.ensure === 'absent') {
      if (now?.kind === 'directory') throw new MeshError('E_CONFLICT', `${r.path} is a directory; mesh will not delete a directory declared as a file`);
      if (now) unlinkSync(real);
      return;
    }
    if (now && now.kind !== 'file') throw new MeshError('E_CONFLICT', `${r.path} is a ${now.kind}, not a file: remove it or declare it as what it is`);
    assertParent(ctx, r.path);
    const mode = parseInt(normalMode(r.mode ?? now?.mode ?? '0644'), 8);
    const content = r.content !== undefined ? Buffer.from(r.content) : now ? readFileSync(real) : Buffer.alloc(0);
    // Staged: written with its mode and owner to its temporary name, renamed into place when the
    // engine commits the batch (atomic.ts), after one sync for the whole batch. Its directory is
    // synced once at the end of the pass: until then a power cut can only lose the rename (the
    // old file stays whole); the intent, already durable, keeps the file owned, and the next
    // pass reads it back and repairs it as drift.
    ctx.pass.writes.stage(real, content, mode, ownership(ctx, r), ctx.faults);
    if (r.check && r.content !== undefined && now?.content !== content.toString('base64')) await check(r.check, r.path, real, now !== null, ctx);
  },

  async prior(r, observed) {
    const now = observed as NodeState | null;
    if (now?.kind === 'file' && (now.size ?? 0) > MAX_PRIOR_BYTES) {
      throw new MeshError('E_TOO_LARGE', `${r.path} already exists and is larger than ${MAX_PRIOR_BYTES} bytes; mesh keeps a copy of what it takes over, so move the file away first`);
    }
    return { existed: now !== null, state: now };
  },
});

/** How long a check may run. */
const CHECK_TIMEOUT_MS = 60_000;

/** Run `argv` on the content staged for `path` (at `real`); a non-zero exit unstages it and fails the change with what the program said. */
async function check(argv: string[], path: string, real: string, exists: boolean, ctx: ResourceContext): Promise<void> {
  const staged = ctx.pass.writes.stagedAt(real)!;
  const [cmd, ...args] = argv.map((a) => (a === '%' ? staged : a));
  const ran = await ctx.exec(cmd!, args, { env: { MESH_ROOT: ctx.root }, cwd: ctx.root, timeoutMs: CHECK_TIMEOUT_MS, group: true });
  if (ran.code === 0 && !ran.timedOut) return;
  ctx.pass.writes.unstage(real);
  const how = ran.timedOut ? `did not finish within ${CHECK_TIMEOUT_MS / 1000}s` : `exited ${ran.code}`;
  const said = tail(masked(ran.output ?? ran.stdout + ran.stderr, ctx.masks)).trim().split('\n').slice(-5).join(' / ');
  throw new MeshError('E_CHECK', `check [${argv.join(', ')}] refused the new content of ${path} (${how}${said ? `: ${said}` : ''}); ${exists ? `${path} is left as it was` : `${path} is not made`}; the next pass tries again`);
}

/** The owner a file should get when one is declared; none declared keeps the one it is created with. */
function ownership(ctx: ResourceContext, r: FileResource) {
  return r.owner === undefined && r.group === undefined ? undefined : (st: Parameters<typeof describeOwnership>[2]) => describeOwnership(ctx, r, st);
}
