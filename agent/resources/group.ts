/** `group`: one group in the root's etc/group with its gid, or its absence, through groupadd/groupmod/groupdel. */
import type { GroupResource } from '../../schema/declaration.js';
import { accountHandler, readGroup, shadowTool, type AccountKind } from './accounts.js';
import type { ResourceContext } from './handler.js';

export interface GroupState extends Record<string, unknown> {
  gid: number;
}

function readState(ctx: ResourceContext, name: string): GroupState | null {
  const entry = readGroup(ctx.root).find((g) => g.name === name);
  return entry ? { gid: entry.gid } : null;
}

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

export const groupHandler = accountHandler<GroupResource, GroupState>(groupAccount, {
  diff: (r, now) => (r.gid !== undefined && now.gid !== r.gid ? [`gid ${now.gid} → ${r.gid}`] : []),

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
});
