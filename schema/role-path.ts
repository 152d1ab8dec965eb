/** Where an include's role lives (`roles/web.yaml`); on its own, so that code that only checks a path loads no schema library. */
export const ROLE_PATH = /^roles\/[A-Za-z0-9._/-]+\.ya?ml$/;
