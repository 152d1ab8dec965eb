/**
 * Bodies: the fields rendered only when their resource says `template: true` (a file's content; a
 * command's run, unless, onlyif and environment; a user's password hash), and the only fields a
 * secret may be read in. The renderer (render-with.ts), the host's store (which keeps them sealed
 * for a resource that read a secret) and plan (which shows them without their values then) share
 * this one list.
 */
export const BODIES: ReadonlySet<string> = new Set(['content', 'run', 'unless', 'onlyif', 'environment', 'password']);
