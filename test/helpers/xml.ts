/**
 * A strict XML well-formedness check, for pages that must open in a browser without one:
 * every tag closed in order, attributes quoted and unique, only the five XML entities and
 * character references, nothing after the root element. Returns the problems (empty when
 * well-formed) and the text content, so that a test can look for what the page says.
 */
const NAME = '[A-Za-z_:][A-Za-z0-9_.:-]*';
const TAG = new RegExp(`^<(/?)(${NAME})((?:\\s+${NAME}\\s*=\\s*(?:"[^"<]*"|'[^'<]*'))*)\\s*(/?)>`);
const ATTR = new RegExp(`(${NAME})\\s*=\\s*(?:"([^"<]*)"|'([^'<]*)')`, 'g');
const ENTITY = /&(?!(?:amp|lt|gt|quot|apos|#[0-9]+|#x[0-9A-Fa-f]+);)/;

export function checkXml(text: string): { problems: string[]; text: string } {
  const problems: string[] = [];
  const open: string[] = [];
  const content: string[] = [];
  let rootClosed = false;
  let at = 0;
  const where = () => `offset ${at} (line ${text.slice(0, at).split('\n').length})`;
  while (at < text.length) {
    const lt = text.indexOf('<', at);
    const chunk = text.slice(at, lt < 0 ? text.length : lt);
    if (ENTITY.test(chunk)) problems.push(`bare & at ${where()}`);
    if (chunk.includes('>')) problems.push(`bare > in text at ${where()}`);
    if (chunk.trim() && open.length === 0) problems.push(`text outside the root element at ${where()}`);
    content.push(chunk);
    if (lt < 0) break;
    at = lt;
    const rest = text.slice(at);
    if (rest.startsWith('<!--')) {
      const end = rest.indexOf('-->');
      if (end < 0) return { problems: [...problems, `unclosed comment at ${where()}`], text: content.join('') };
      at += end + 3;
      continue;
    }
    if (/^<!DOCTYPE [^<>]*>/.test(rest) && open.length === 0 && !rootClosed) {
      at += rest.indexOf('>') + 1;
      continue;
    }
    const m = TAG.exec(rest);
    if (!m) return { problems: [...problems, `malformed tag at ${where()}: ${rest.slice(0, 40)}`], text: content.join('') };
    const [whole, closing, name, attrs, selfClosing] = m;
    const names = [...attrs!.matchAll(ATTR)].map((a) => a[1]!);
    if (new Set(names).size !== names.length) problems.push(`duplicate attribute in <${name}> at ${where()}`);
    for (const a of attrs!.matchAll(ATTR)) if (ENTITY.test(a[2] ?? a[3] ?? '')) problems.push(`bare & in attribute ${a[1]} at ${where()}`);
    if (rootClosed) problems.push(`element <${name}> after the root element at ${where()}`);
    if (closing) {
      const expected = open.pop();
      if (expected !== name) problems.push(`</${name}> closes <${expected ?? 'nothing'}> at ${where()}`);
      if (open.length === 0) rootClosed = true;
    } else if (!selfClosing) open.push(name!);
    at += whole.length;
  }
  if (open.length) problems.push(`unclosed: ${open.join(' > ')}`);
  return { problems, text: content.join('') };
}
