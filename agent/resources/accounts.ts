/**
 * The user and group database of a machine: read straight from the root's own etc/passwd and
 * etc/group, and changed only through the real shadow-utils tools confined to that root.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { MeshError } from '../../core/errors.js';
import { underRoot } from '../paths.js';
import type { GroupResource, UserResource } from '../../schema/declaration.js';
import type { OwnedRecord } from '../../schema/report.js';
import type { Handler, ResourceContext } from './handler.js';
import { invalidateIdCache } from './ownership.js';

export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  /** The GECOS field (a full name, a room, a phone…), as `comment` declares it. */
  comment: string;
  home: string;
  shell: string;
}

export interface GroupEntry {
  name: string;
  gid: number;
  members: string[];
}

/** Every user in the root's etc/passwd (none when the file is missing). */
export function readPasswd(root: string): PasswdEntry[] {
  return rows(root, '/etc/passwd').flatMap(([name, , uid, gid, comment, home, shell]) =>
    name && /^\d+$/.test(uid ?? '') && /^\d+$/.test(gid ?? '') ? [{ name, uid: Number(uid), gid: Number(gid), comment: comment ?? '', home: home ?? '', shell: shell ?? '' }] : [],
  );
}

/** The password hash field of `name` in the root's etc/shadow ('' when it has no entry, or the machine no etc/shadow). */
export function readShadowHash(root: string, name: string): string {
  return rows(root, '/etc/shadow').find(([user]) => user === name)?.[1] ?? '';
}

/** Every group in the root's etc/group (none when the file is missing). */
export function readGroup(root: string): GroupEntry[] {
  return rows(root, '/etc/group').flatMap(([name, , gid, members]) =>
    name && /^\d+$/.test(gid ?? '') ? [{ name, gid: Number(gid), members: (members ?? '').split(',').filter(Boolean) }] : [],
  );
}

function rows(root: string, file: string): string[][] {
  let text: string;
  try {
    text = readFileSync(underRoot(root, file), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.split(':'));
}

/**
 * Run a shadow-utils tool (useradd, usermod, userdel, groupadd, groupmod, groupdel, chpasswd) on
 * the machine at ctx.root, with `input` on its stdin. `--root` makes the tool chroot into the root
 * before it touches anything, so passwd, shadow, group, gshadow, login.defs, lock files and name
 * lookups are all the root's own, and a symlink inside the root cannot lead a write out of it
 * (`--prefix` would follow it).
 */
export async function shadowTool(ctx: ResourceContext, tool: string, args: string[], input?: string): Promise<void> {
  const root = resolve(ctx.root);
  const confined = root === '/' ? args : ['--root', root, ...args];
  const r = await ctx.exec(tool, confined, { env: { LC_ALL: 'C' }, ...(input !== undefined ? { input } : {}) });
  invalidateIdCache(ctx.pass); // file ownership lookups must see this change within the same pass
  if (r.code !== 0) {
    const why = r.stderr.trim().split('\n').filter((l) => !l.includes('Warning')).join('; ') || `exit code ${r.code}`;
    throw new MeshError(`E_${tool.toUpperCase()}`, `${tool} ${args.join(' ')} failed: ${why}`, { data: { tool, args, code: r.code } });
  }
}

/** How one kind of account (user, group) is read, compared and put back, for `restoreAccount`. */
export interface AccountKind<S> {
  kind: 'user' | 'group';
  /** What is not known when no earlier state was kept ("fields", "gid"). */
  earlier: string;
  read(ctx: ResourceContext, name: string): S | null;
  differences(before: S, now: S): string[];
  /** Create the account again as `before`; what was done. */
  recreate(ctx: ResourceContext, name: string, before: S): Promise<string>;
  /** Change the account back to `before`; what was done. */
  restore(ctx: ResourceContext, name: string, before: S, now: S, changed: string[]): Promise<string>;
}

/**
 * A handler for one kind of account, from the parts that are its own: reading it by name, the
 * difference of presence, its prior state and restoring it on removal are the same for both.
 */
export function accountHandler<R extends UserResource | GroupResource, S>(
  account: AccountKind<S>,
  parts: { diff(r: R, now: S): string[]; apply: Handler<R>['apply']; needs?: Handler<R>['needs'] },
): Handler<R> {
  return {
    ...(parts.needs ? { needs: parts.needs } : {}),
    async read(r, ctx) {
      return account.read(ctx, r.name) as Record<string, unknown> | null;
    },
    // `system` only picks the id range when the account is created; it is not compared afterwards.
    diff(r, observed) {
      const now = observed as S | null;
      if (r.ensure === 'absent') return now ? ['exists, should be absent'] : [];
      return now ? parts.diff(r, now) : ['absent, should exist'];
    },
    apply: parts.apply,
    async prior(_r, observed) {
      return { existed: observed !== null, state: observed };
    },
    // An account that was there before is never deleted: what mesh changed is put back.
    async remove(record, ctx) {
      return restoreAccount(ctx, record, account);
    },
  };
}

/**
 * Un-declaring an account: one the host created is deleted; one that was there before is never
 * deleted: it is re-created or changed back to what it was. Returns a note for the report.
 */
async function restoreAccount<S>(ctx: ResourceContext, record: OwnedRecord, account: AccountKind<S>): Promise<string | undefined> {
  const name = String(record.resource.name);
  const before = (record.prior?.state ?? null) as S | null;
  const now = account.read(ctx, name);
  if (!record.prior?.existed) {
    if (now) await shadowTool(ctx, `${account.kind}del`, [name]);
    return undefined;
  }
  if (!before) return `left ${account.kind} ${name} as it is: it existed before mesh took it over, and its earlier ${account.earlier} ${account.earlier.endsWith('s') ? 'are' : 'is'} not known`;
  if (!now) return account.recreate(ctx, name, before);
  const changed = account.differences(before, now);
  if (changed.length === 0) return `left ${account.kind} ${name} in place: it existed before mesh took it over`;
  return account.restore(ctx, name, before, now, changed);
}
