/**
 * The declaration: what one node must have. Users write it as YAML under nodes/<node>/;
 * the host and `mesh-cli plan` read it through `loadDeclaration`. Unknown fields are
 * errors, and modes and versions are strings (YAML 1.2 reads 0644 as the number 644).
 */
import * as z from 'zod';
import { ROLE_PATH } from './role-path.js';

const absolutePath = z
  .string()
  .min(1)
  .refine((p) => p.startsWith('/'), { message: 'must be an absolute path (start with /)' })
  .refine((p) => !p.split('/').includes('..'), { message: "must not contain '..'" })
  .refine((p) => !p.includes('\0'), { message: 'must not contain a NUL byte' })
  // One path, one id: /etc/x, /etc//x, /etc/./x and /etc/x/ would otherwise be four resources for one file.
  .superRefine((p, ctx) => {
    const canonical = canonicalPath(p);
    if (p.startsWith('/') && p !== canonical) ctx.addIssue({ code: 'custom', message: `write it as ${canonical} (one form per path: no //, no /./, no trailing /)` });
  });

/** `path` with repeated slashes, `.` segments and a trailing slash taken out (the root stays /). */
export function canonicalPath(path: string): string {
  const parts = path.split('/').filter((part) => part !== '' && part !== '.');
  return `/${parts.join('/')}`;
}

const mode = z
  .string({ error: (i) => (typeof i.input === 'number' ? 'mode must be a quoted string such as "0644" (YAML reads 0644 as a number)' : 'mode must be a string such as "0644"') })
  .regex(/^0?[0-7]{3}$|^[0-7]{4}$/, { message: 'mode must be octal digits such as "0644"' });

/** What Salt, Ansible and Puppet write for "the newest" or "any": not versions apt knows. */
const NOT_A_VERSION = /^(latest|newest|installed|present|any|\*)$/i;
const version = z
  .string({ error: (i) => (typeof i.input === 'number' ? 'version must be a quoted string (YAML reads 1.10 as 1.1)' : 'version must be a string') })
  .refine((v) => !NOT_A_VERSION.test(v.trim()), {
    error: (i) => `'${String(i.input)}' is not a version apt knows: mesh installs a package once and upgrades it when version changes, so give the Debian version to hold (such as "1.22.1-9", as 'apt-cache policy NAME' lists it), or leave version out to install the candidate`,
  });

const name = z.string().regex(/^[a-z_][a-z0-9_.+-]*$/i, { message: 'must be a plain name (letters, digits, . _ + -)' });
const ensure = z.enum(['present', 'absent']).optional();
const ownership = { owner: name.optional(), group: name.optional() };

export const FileResource = z
  .strictObject({
    type: z.literal('file'),
    path: absolutePath,
    content: z.string().refine((c) => !c.includes('\0'), { message: 'content holds a NUL byte: mesh writes text files only, so binary content belongs in a package' }).optional(),
    source: z.string().min(1).optional(),
    /** Render the body (content or the source file) as a Liquid template; short fields are always rendered. */
    template: z.boolean().optional(),
    mode: mode.optional(),
    ...ownership,
    ensure,
    /**
     * A program (argv) that checks new content before it takes the file's place, as Puppet's
     * validate_cmd: the argument % is the new content's path; a non-zero exit leaves the file as it was.
     */
    check: z
      .array(z.string().min(1))
      .min(1)
      .refine((argv) => argv.includes('%'), { message: "check names the new content with the argument %, as in [visudo, -cf, '%']" })
      .optional(),
  })
  .refine((f) => !(f.content !== undefined && f.source !== undefined), { message: 'give either content or source, not both' })
  .refine((f) => !(f.check !== undefined && f.ensure === 'absent'), { message: 'check tests new content, and an absent file has none: drop check', path: ['check'] });

export const DirectoryResource = z
  .strictObject({
    type: z.literal('directory'),
    path: absolutePath,
    mode: mode.optional(),
    ...ownership,
    ensure,
    /** Move away every file and link directly in it that this node does not declare (Puppet's purge; folders in it are left). */
    purge: z.boolean().optional(),
  })
  .refine((d) => !(d.purge && d.ensure === 'absent'), { message: 'purge empties a directory that stays: drop purge, or ensure: absent', path: ['purge'] });

export const SymlinkResource = z
  .strictObject({
    type: z.literal('symlink'),
    path: absolutePath,
    /** What the link points at, stored as written: absolute (inside the machine) or relative to the link's folder. */
    target: z.string().min(1).refine((t) => !t.includes('\0'), { message: 'must not contain a NUL byte' }).optional(),
    ensure,
  })
  .refine((l) => l.target !== undefined || l.ensure === 'absent', { message: 'a symlink needs a target (or ensure: absent)', path: ['target'] });

export const PackageResource = z
  .strictObject({
    type: z.literal('package'),
    name: z.string().regex(/^[a-z0-9][a-z0-9+.-]+$/, { message: 'must be a Debian package name' }),
    version: version.optional(),
    ensure,
    /** With ensure: absent, its configuration files go too (apt-get purge; Puppet's ensure => purged). */
    purge: z.boolean().optional(),
  })
  .refine((p) => !(p.purge && p.ensure !== 'absent'), { message: 'purge removes a package with its configuration files: write ensure: absent with it, or drop purge', path: ['purge'] });

export const ServiceResource = z.strictObject({
  type: z.literal('service'),
  name: z.string().regex(/^[A-Za-z0-9_][A-Za-z0-9:_.@\\-]*$/, { message: 'must be a systemd unit name such as nginx or nginx.service' }),
  enabled: z.boolean().optional(),
  running: z.boolean().optional(),
  /** Files whose change in the same pass restarts the service (like Puppet's notify). */
  restartOn: z.array(absolutePath).optional(),
  /**
   * Files whose change in the same pass reloads the service instead (`systemctl reload`: nginx,
   * haproxy or apache read their configuration again without dropping connections); a restart in
   * the same pass makes it needless, and a service that is not running is not reloaded.
   */
  reloadOn: z.array(absolutePath).optional(),
});

export const UserResource = z.strictObject({
  type: z.literal('user'),
  name,
  uid: z.number().int().nonnegative().optional(),
  group: name.optional(),
  groups: z.array(name).optional(),
  /** The GECOS field: a full name, say. */
  comment: z.string().regex(/^[^:\n]*$/, { message: 'a comment is one line without a colon (etc/passwd separates its fields with colons)' }).optional(),
  home: absolutePath.optional(),
  shell: absolutePath.optional(),
  /**
   * The hash etc/shadow holds, as `openssl passwd -6` or `mkpasswd` prints it, or ! (no password:
   * the account cannot log in with one). A body: with `template: true` it may read a secret
   * (`{{ secrets.NAME }}`), whose stand-in (`[secret NAME HASH]`) it is wherever the secret is not
   * decrypted; the host checks the value when it decrypts it.
   */
  password: z
    .string()
    .regex(/^(?:!?\$[^:\s]+|!|\*|\[secret \S+ [0-9a-f]{16}\])$/, {
      error: (i) =>
        typeof i.input === 'string' && i.input.includes('{{')
          ? 'password is a template, rendered only with template: true: add template: true to this user'
          : "password is the hash etc/shadow holds, as 'openssl passwd -6' or 'mkpasswd -m yescrypt' prints it (starting with $), or ! for no password: never the password itself",
    })
    .optional(),
  system: z.boolean().optional(),
  /** Render password as a template (it may then read a secret). */
  template: z.boolean().optional(),
  ensure,
});

export const GroupResource = z.strictObject({
  type: z.literal('group'),
  name,
  gid: z.number().int().nonnegative().optional(),
  system: z.boolean().optional(),
  ensure,
});

/** A duration as core/duration.ts reads it: "90s", "5m", "1.5h", "500ms", or plain seconds. */
const duration = z.string().regex(/^\s*\d+(?:\.\d+)?(?:ms|s|m|h|d)?\s*$/, { message: 'must be a duration such as 30s, 5m or 1h' });

/** A resource named by its id, as `file:/etc/app/app.ini` or `service:nginx`. */
const resourceRef = z.string().regex(/^[a-z]+:\S/, { message: 'must name a resource by its id, type:path or type:name, such as file:/etc/app/app.ini' });

/** An argv list (no shell), or one line for /bin/sh -c when the resource says shell: true. */
const commandLine = z.union([z.array(z.string().min(1, { message: 'an argument may not be empty' })).min(1, { message: 'give the program to run' }), z.string().min(1)], {
  error: (i) => {
    const odd = Array.isArray(i.input) ? i.input.find((a) => typeof a !== 'string') : undefined;
    if (odd !== undefined) return `every argument is a string: quote ${String(odd)} (YAML reads it as a ${odd === null ? 'null' : typeof odd})`;
    return 'give an argv list such as [systemctl, reload, app], or one string with shell: true';
  },
});

const needsShell = (field: 'run' | 'unless' | 'onlyif') => (c: { shell?: boolean; run: unknown; unless?: unknown; onlyif?: unknown }) => typeof c[field] !== 'string' || c.shell === true;
const noShell = (field: 'run' | 'unless' | 'onlyif') =>
  `${field} is a single string, which only a shell can split: write it as an argv list such as [systemctl, reload, app], or set shell: true to run it with /bin/sh -c`;

/** A name an environment variable may have (as a shell reads it). */
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: 'a variable name is letters, digits and _ (not starting with a digit)' });

/**
 * An action, not a state: runs `run` when a resource named in `onChange` (declared before it)
 * changed, when `creates` is missing, when `unless` exits non-zero, or when `onlyif` exits 0;
 * with none of them, on every pass. It owns nothing. It runs as root in / unless `user` and `cwd`
 * say otherwise, with `environment` added to its variables. `run`, `unless`, `onlyif` and
 * `environment` are bodies: rendered only with template: true.
 */
export const CommandResource = z
  .strictObject({
    type: z.literal('command'),
    name,
    run: commandLine,
    /** Run `run` (and `unless`), each one string, with /bin/sh -c. */
    shell: z.boolean().optional(),
    onChange: z.array(resourceRef).optional(),
    creates: absolutePath.optional(),
    unless: commandLine.optional(),
    /** Run `run` only when this exits 0 (Puppet's onlyif). */
    onlyif: commandLine.optional(),
    /** Run as this user: its uid, its primary group and the groups etc/group gives it, and HOME, USER and LOGNAME from its passwd entry (default root). */
    user: name.optional(),
    /** The folder it runs in (default /). */
    cwd: absolutePath.optional(),
    /** Variables added to its environment. */
    environment: z.record(envName, z.string()).optional(),
    /** Longest a run may take before it is killed (default 5m). */
    timeout: duration.optional(),
    /** The exit statuses that count as success (default [0]), as Puppet's returns. */
    returns: z.array(z.number().int().min(0).max(255)).min(1).optional(),
    /** How many times `run` is tried before it fails (default 1; a run killed for its timeout is not tried again), as Puppet's tries. */
    tries: z.number().int().min(1).max(10).optional(),
    /** The wait between two tries (default 0s), as Puppet's try_sleep. */
    trySleep: duration.optional(),
    template: z.boolean().optional(),
  })
  .refine((c) => c.trySleep === undefined || (c.tries ?? 1) > 1, { message: 'trySleep waits between tries: give tries (2 or more), or drop trySleep', path: ['trySleep'] })
  .refine(needsShell('run'), { message: noShell('run'), path: ['run'] })
  .refine(needsShell('unless'), { message: noShell('unless'), path: ['unless'] })
  .refine(needsShell('onlyif'), { message: noShell('onlyif'), path: ['onlyif'] })
  .refine((c) => c.shell !== true || [c.run, c.unless, c.onlyif].every((l) => l === undefined || typeof l === 'string'), {
    message: 'shell: true runs one line with /bin/sh -c: write run (and unless, onlyif) as one string, or drop shell: true and keep the argv list',
    path: ['shell'],
  });

export const Resource = z.discriminatedUnion('type', [
  FileResource,
  DirectoryResource,
  SymlinkResource,
  PackageResource,
  ServiceResource,
  UserResource,
  GroupResource,
  CommandResource,
]);

const rolePath = z.string().regex(ROLE_PATH, { message: 'must name a file under roles/, e.g. roles/web.yaml' });

/** An include: a role's path, or the path with the parameters it is given (`params.*` inside it). */
export const Include = z.union([rolePath, z.strictObject({ role: rolePath, with: z.record(z.string(), z.unknown()).optional() })]);

/** One declaration file: optional role includes and an ordered list of resources. */
export const DeclarationFile = z.strictObject({
  include: z.array(Include).optional(),
  resources: z.array(Resource).default([]),
});

/** A role: a fragment included by declarations and other roles, with the parameters it takes (null: required; else the default). */
export const RoleFile = z.strictObject({
  params: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: 'a parameter name is letters, digits and _' }), z.unknown()).optional(),
  include: z.array(Include).optional(),
  resources: z.array(Resource).default([]),
});

export type Resource = z.infer<typeof Resource>;
export type ResourceType = Resource['type'];
export type FileResource = z.infer<typeof FileResource>;
export type DirectoryResource = z.infer<typeof DirectoryResource>;
export type SymlinkResource = z.infer<typeof SymlinkResource>;
export type PackageResource = z.infer<typeof PackageResource>;
export type ServiceResource = z.infer<typeof ServiceResource>;
export type UserResource = z.infer<typeof UserResource>;
export type GroupResource = z.infer<typeof GroupResource>;
export type CommandResource = z.infer<typeof CommandResource>;
export type DeclarationFile = z.infer<typeof DeclarationFile>;
export type RoleFile = z.infer<typeof RoleFile>;
export type Include = z.infer<typeof Include>;

