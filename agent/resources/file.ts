/** `file`: content, mode, owner and group of one regular file, or its absence. */
import { chmodSync, chownSync, lstatSync, readFileSync, unlinkSync } from 'node:fs';
import type { FileResource } from '../../schema/declaration.js';
import { writeFileAtomic } from '../atomic.js';
import { MeshError } from '../../core/errors.js';
import { describeOwnership, type NodeState } from './node.js';
import { assertParent, attributeDiff, nodeHandler, normalMode, ownerNeeds } from './node-handler.js';

/** Files larger than this are not captured for restore; the host refuses to take them over. */
const MAX_PRIOR_BYTES = 1024 * 1024;

export const fileHandler = nodeHandler<FileResource>('file', {
  withContent: true,
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
    assertParent(ctx, r.path, 'this file');
    const mode = parseInt(normalMode(r.mode ?? now?.mode ?? '0644'), 8);
    const content = r.content !== undefined ? Buffer.from(r.content) : now ? readFileSync(real) : Buffer.alloc(0);
    // The directory is synced once at the end of the pass (apply.ts): until then a power cut can
    // only lose this rename (the old file stays whole); the intent, already durable, keeps the
    // file owned, and the next pass reads it back and repairs it as drift.
    writeFileAtomic(real, content, mode, { deferDirSync: ctx.pass.dirsToSync, faults: ctx.faults });
    chmodSync(real, mode); // the umask narrowed the mode given to open()
    const { uid, gid } = describeOwnership(ctx, r, lstatSync(real));
    chownSync(real, uid, gid);
  },

  async prior(r, observed) {
    const now = observed as NodeState | null;
    if (now?.kind === 'file' && (now.size ?? 0) > MAX_PRIOR_BYTES) {
      throw new MeshError('E_TOO_LARGE', `${r.path} already exists and is larger than ${MAX_PRIOR_BYTES} bytes; mesh keeps a copy of what it takes over, so move the file away first`);
    }
    return { existed: now !== null, state: now };
  },
});
