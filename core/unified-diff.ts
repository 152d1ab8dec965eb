/**
 * Unified diffs of file content for `mesh-cli plan` and `mesh-host --noop`, with anything that looks like a secret
 * elided: the password of a URL (`postgres://app:…@db`), an Authorization header's value, the
 * value of a key whose name has a word like pass, password, secret, token or key (ini, env,
 * YAML and JSON lines), and the body of a private key block. A plan is posted on pull requests, so it must never carry a secret, but
 * it still shows that the line changed.
 */

/** Lines of a unified diff from `a` to `b` ("@@ -1,3 +1,4 @@", " same", "-old", "+new"); empty when equal. */
export function unifiedDiff(a: string, b: string, context = 3): string[] {
  if (a === b) return [];
  const x = splitLines(a);
  const y = splitLines(b);
  const ops = editScript(x, y);
  const out: string[] = [];
  let i = 0;
  while (i < ops.length) {
    if (ops[i]!.op === ' ') {
      i++;
      continue;
    }
    const start = Math.max(0, i - context);
    // The hunk runs on while the next change is at most 2*context unchanged lines away.
    let end = i;
    for (let j = i + 1; j < ops.length && j - end <= 2 * context; j++) if (ops[j]!.op !== ' ') end = j;
    const stop = Math.min(ops.length, end + context + 1);
    const hunk = ops.slice(start, stop);
    const first = ops[start]!;
    const aLen = hunk.filter((o) => o.op !== '+').length;
    const bLen = hunk.filter((o) => o.op !== '-').length;
    out.push(`@@ -${aLen ? first.a + 1 : first.a},${aLen} +${bLen ? first.b + 1 : first.b},${bLen} @@`);
    out.push(...hunk.map((o) => o.op + o.text));
    i = stop;
  }
  if (!a.endsWith('\n') && a !== '') out.push('\\ No newline at end of file (before)');
  if (!b.endsWith('\n') && b !== '') out.push('\\ No newline at end of file (after)');
  return out;
}

interface Op {
  op: ' ' | '-' | '+';
  text: string;
  /** Lines of a and b before this one. */
  a: number;
  b: number;
}

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** Longest-common-subsequence edit script; beyond a few million cells the middle is replaced whole. */
function editScript(x: string[], y: string[]): Op[] {
  let pre = 0;
  while (pre < x.length && pre < y.length && x[pre] === y[pre]) pre++;
  let suf = 0;
  while (suf < x.length - pre && suf < y.length - pre && x[x.length - 1 - suf] === y[y.length - 1 - suf]) suf++;
  const xm = x.slice(pre, x.length - suf);
  const ym = y.slice(pre, y.length - suf);
  const middle: Array<' ' | '-' | '+'> = [];
  if (xm.length * ym.length > 4_000_000) middle.push(...xm.map(() => '-' as const), ...ym.map(() => '+' as const));
  else {
    const lcs = Array.from({ length: xm.length + 1 }, () => new Uint32Array(ym.length + 1));
    for (let i = xm.length - 1; i >= 0; i--) for (let j = ym.length - 1; j >= 0; j--) lcs[i]![j] = xm[i] === ym[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    let i = 0;
    let j = 0;
    while (i < xm.length || j < ym.length) {
      if (i < xm.length && j < ym.length && xm[i] === ym[j]) (middle.push(' '), i++, j++);
      else if (i < xm.length && (j === ym.length || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) (middle.push('-'), i++);
      else (middle.push('+'), j++);
    }
  }
  const ops: Op[] = [];
  let a = 0;
  let b = 0;
  for (const op of [...Array(pre).fill(' '), ...middle, ...Array(suf).fill(' ')] as Array<' ' | '-' | '+'>) {
    ops.push({ op, text: op === '+' ? y[b]! : x[a]!, a, b });
    if (op !== '+') a++;
    if (op !== '-') b++;
  }
  return ops;
}

/** `name = value`, `name: value`, `export NAME=value`, `"name": value` (ini, env, YAML, one-key JSON lines): the name and where the value starts. */
const KEY_LINE = /^(\s*(?:export\s+)?["']?([\w.-]+)["']?\s*[:=]\s*)(\S.*)$/;
/** `"name": "value"` pairs inside a line of JSON. */
const JSON_PAIR = /("([\w.-]+)"\s*:\s*)("(?:[^"\\]|\\.)*"|[^,}\]\s]+)/g;
/** The password of a URL's user-info: `postgres://app:PASSWORD@db/app`. */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*):([^\s@/]+)@/gi;
/** An HTTP Authorization header's credentials, wherever it sits in a line (a config, a curl -H). */
const AUTHORIZATION = /\b((?:proxy-)?authorization["']?\s*[:=]\s*)(?:(?:bearer|basic|token|digest)\s+)?[^\s"',;]+/gi;
/** Words of a key name that say its value is a secret (matched per word of snake_case, kebab-case, dotted or camelCase names). */
const SECRET_WORDS = new Set(['pass', 'password', 'passwd', 'passphrase', 'pwd', 'secret', 'secrets', 'token', 'tokens', 'key', 'apikey', 'credential', 'credentials', 'auth']);

/** Whether a key named `name` holds a secret: one of its words is pass, password, secret, token, key… */
export function secretName(name: string): boolean {
  const words = name.split(/[_.-]+|(?<=[a-z0-9])(?=[A-Z])/).map((w) => w.toLowerCase());
  return words.some((w) => SECRET_WORDS.has(w)) || /password|passwd|secret|token|api_?key|private_?key/i.test(name);
}

/** One line of a body with what looks secret replaced by «elided»: URL passwords, Authorization values, values of secret-named keys. */
export function maskLine(text: string): string {
  const masked = text.replace(URL_PASSWORD, '$1:«elided»@').replace(AUTHORIZATION, '$1«elided»').replace(JSON_PAIR, (all, head: string, name: string) => (secretName(name) ? `${head}"«elided»"` : all));
  const line = KEY_LINE.exec(masked);
  return line && secretName(line[2]!) && !line[3]!.startsWith('"«elided»"') ? `${line[1]}«elided»` : masked;
}

const BEGIN_KEY = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----/;
const END_KEY = /-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----/;
/** A long unbroken base64 line: the body of a key block whose BEGIN line is outside the hunk. */
const KEY_MATERIAL = /^\s*[A-Za-z0-9+/]{40,}={0,2}\s*$/;

/** Diff lines with secret values replaced by «elided»; a private key block keeps only its BEGIN and END lines. */
export function elideSecrets(lines: string[]): string[] {
  const out: string[] = [];
  let inKey = false;
  for (const line of lines) {
    const mark = /^[ +-]/.test(line) ? line[0]! : '';
    const text = mark ? line.slice(1) : line;
    if (inKey && !END_KEY.test(text)) {
      const elided = `${mark}«private key elided»`;
      if (out[out.length - 1] !== elided) out.push(elided);
      continue;
    }
    inKey = BEGIN_KEY.test(text) && !END_KEY.test(text) ? true : END_KEY.test(text) ? false : inKey;
    out.push(KEY_MATERIAL.test(text) ? `${mark}«key material elided»` : `${mark}${maskLine(text)}`);
  }
  return out;
}

const SECRET_PATH = /(secret|passw|shadow|token|credential|private|\.key$|\.pem$|\.p12$|id_rsa|id_ed25519)/i;

/** The one line every diff shows for a resource that read a secret, whatever its template did with the value (encoded, split, hashed). */
export const SENSITIVE_CHANGE = 'changed (sensitive)';

/** The diff of a file at `path`: whole-content elision when the path itself looks secret (/etc/shadow, *.key), else per line. */
export function safeDiff(path: string, before: string, after: string): string[] {
  const lines = unifiedDiff(before, after);
  if (lines.length === 0 || !SECRET_PATH.test(path)) return elideSecrets(lines);
  const count = (mark: string) => {
    const n = lines.filter((l) => l.startsWith(mark)).length;
    return `${n} line${n === 1 ? '' : 's'}`;
  };
  return [`«content of ${path} elided (its name looks secret): ${count('-')} removed, ${count('+')} added»`];
}
