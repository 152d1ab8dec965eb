/**
 * `user`: one account in the root's etc/passwd — uid, primary group, supplementary groups,
 * comment, home and shell, and its password hash in etc/shadow — or its absence, through
 * useradd/usermod/userdel. mesh never creates or deletes home directories: declare the home as a
 * `directory` owned by the user. A password hash is never shown: its difference is "password
 * changed", as Puppet says it.
 */
import { isDeepStrictEqual } from 'node:util';
import type { UserResource } from '../../schema/declaration.js';
import { accountHandler, readGroup, readPasswd, readShadowHash, shadowTool, type AccountKind } from './accounts.js';
import type { ResourceContext } from './handler.js';

export interface UserState extends Record<string, unknown> {
  uid: number;
  /** Primary group by name (the gid as a string when the group has no entry). */
  group: string;
  /** Supplementary groups, sorted. */
  groups: string[];
  comment: string;
  home: string;
  shell: string;
  /** The hash etc/shadow holds ('' when it holds none). A state kept by an earlier host may lack it and `comment`: they are then left as they are. */
  password: string;
}

type Wanted = Partial<Pick<UserState, 'uid' | 'group' | 'groups' | 'comment' | 'home' | 'shell' | 'password'>>;

function readState(ctx: ResourceContext, name: string): UserState | null {
  const entry = readPasswd(ctx.root).find((u) => u.name === name);
  if (!entry) return null;
  const groups = readGroup(ctx.root);
  const group = groups.find((g) => g.gid === entry.gid)?.name ?? String(entry.gid);
  const member = groups.filter((g) => g.members.includes(name)).map((g) => g.name).sort();
  return { uid: entry.uid, group, groups: member, comment: entry.comment, home: entry.home, shell: entry.shell, password: readShadowHash(ctx.root, name) };
}

/** One phrase per field of `want` that differs from `now`. */
function differences(want: Wanted, now: UserState): string[] {
  const out: string[] = [];
  for (const key of ['uid', 'group', 'home', 'shell'] as const) {
    if (want[key] !== undefined && want[key] !== now[key]) out.push(`${key} ${now[key]} → ${want[key]}`);
  }
  const groups = want.groups && [...want.groups].sort();
  if (groups && !isDeepStrictEqual(groups, now.groups)) out.push(`groups ${now.groups.join(',') || '(none)'} → ${groups.join(',') || '(none)'}`);
  if (want.comment !== undefined && want.comment !== now.comment) out.push(`comment ${JSON.stringify(now.comment)} → ${JSON.stringify(want.comment)}`);
  if (want.password !== undefined && want.password !== now.password) out.push('password changed');
  return out;
}

/** useradd/usermod options that set every field of `want` that differs from `now` (all of them when `now` is null) but the password (setPassword). */
function options(want: Wanted, now: UserState | null): string[] {
  const differs = <K extends keyof Wanted>(k: K) => want[k] !== undefined && (!now || !isDeepStrictEqual(k === 'groups' ? [...want.groups!].sort() : want[k], now[k]));
  return [
    ...(differs('uid') ? ['--uid', String(want.uid)] : []),
    ...(differs('group') ? ['--gid', want.group!] : []),
    ...(differs('groups') && (now || want.groups!.length > 0) ? ['--groups', want.groups!.join(',')] : []),
    ...(differs('comment') ? ['--comment', want.comment!] : []),
    ...(differs('home') ? ['--home', want.home!] : []),
    ...(differs('shell') ? ['--shell', want.shell!] : []),
  ];
}

/**
 * Set `name`'s password hash to `want`'s when it differs from `now`'s, through chpasswd's stdin:
 * on a command line (`usermod --password`, as Puppet's useradd provider does it) every local
 * user could read the hash in /proc while the tool runs.
 */
async function setPassword(ctx: ResourceContext, name: string, want: Wanted, now: UserState | null): Promise<void> {
  if (want.password === undefined || want.password === (now?.password ?? '')) return;
  await shadowTool(ctx, 'chpasswd', ['--encrypted'], `${name}:${want.password}\n`);
}

const userAccount: AccountKind<UserState> = {
  kind: 'user',
  earlier: 'fields',
  read: readState,
  differences,
  async recreate(ctx, name, before) {
    await shadowTool(ctx, 'useradd', ['--no-create-home', ...options(before, null), name]);
    await setPassword(ctx, name, before, null);
    return `re-created user ${name} with its earlier uid, groups, home${before.password === undefined ? ' and shell (not its password)' : ', shell, comment and password'}`;
  },
  async restore(ctx, name, before, now, changed) {
    if (options(before, now).length > 0) await shadowTool(ctx, 'usermod', [...options(before, now), name]);
    await setPassword(ctx, name, before, now);
    return `restored user ${name}: ${changed.join('; ')}`;
  },
};

export const userHandler = accountHandler<UserResource, UserState>(userAccount, {
  diff: differences,

  async apply(r, observed, ctx) {
    const now = observed as UserState | null;
    if (r.ensure === 'absent') {
      if (now) await shadowTool(ctx, 'userdel', [r.name]);
      return;
    }
    if (!now) await shadowTool(ctx, 'useradd', ['--no-create-home', ...(r.system ? ['--system'] : []), ...options(r, null), r.name]);
    else if (options(r, now).length > 0) await shadowTool(ctx, 'usermod', [...options(r, now), r.name]);
    await setPassword(ctx, r.name, r, now);
  },

  needs(r) {
    return [r.group, ...(r.groups ?? [])].flatMap((g) => (g ? [{ id: `group:${g}`, field: g === r.group ? 'group' : 'groups' }] : []));
  },
});
