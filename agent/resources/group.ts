/** `group`: one group in the root's etc/group with its gid, or its absence, through groupadd/groupmod/groupdel. */
import type { GroupResource } from '../../schema/declaration.js';
import { readGroup, restoreAccount, shadowTool, type AccountKind } from './accounts.js';
import type { Handler, ResourceContext } from './handler.js';

export interface GroupState extends Record<string, unknown> {
  gid: number;
}

function readState(ctx: ResourceContext, name: string): GroupState | null {
  const entry = readGroup(ctx.root).find((g) => g.name === name);
  return entry ? { gid: entry.gid } : null;
}

export const groupHandler: Handler<GroupResource> = {
  async read(r, ctx) {
    return readState(ctx, r.name);
  },

  // `system` only picks the gid range when the group is created; it is not compared afterwards.
  diff(r, observed) {
    const now = observed as GroupState | null;
    if (r.ensure === 'absent') return now ? ['exists, should be absent'] : [];
    if (!now) return ['absent, should exist'];
    return r.gid !== undefined && now.gid !== r.gid ? [`gid ${now.gid} → ${r.gid}`] : [];
  },

  async apply(r, observed, ctx) {
    const now = observed as GroupState | null;
    if (r.ensure === 'absent') {
      if (now) await shadowTool(ctx, 'groupdel', [r.name]);
      return;
    }
    const gid = r.gid !== undefined ? ['--gid', String(r.gid)] : [];
    if (!now) await shadowTool(ctx, 'groupadd', [...(r.system ? ['--system'] : []), ...gid, r.name]);
    else if (r.gid !== undefined && now.gid !== r.gid) await shadowTool(ctx, 'groupmod', [...gid, r.name]);
  },

  async prior(_r, observed) {
    return { existed: observed !== null, state: observed };
  },

  // A group that was there before is never deleted: its gid is put back (or it is re-created with it).
  async remove(record, ctx) {
    return restoreAccount(ctx, record, groupAccount);
  },
};

const groupAccount: AccountKind<GroupState> = {
  kind: 'group',
  earlier: 'gid',
  read: readState,
  differences: (before, now) => (now.gid === before.gid ? [] : [`gid ${now.gid} → ${before.gid}`]),
  async recreate(ctx, name, before) {
    await shadowTool(ctx, 'groupadd', ['--gid', String(before.gid), name]);
    return `re-created group ${name} with gid ${before.gid}, as it was before mesh took it over`;
  },
  async restore(ctx, name, before) {
    await shadowTool(ctx, 'groupmod', ['--gid', String(before.gid), name]);
    return `restored group ${name} to gid ${before.gid}`;
  },
};
