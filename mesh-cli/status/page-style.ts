/**
 * How the fleet page (commands/html.ts) looks: its style sheet, and the small script that
 * measures what a person sees. Apart from the page's markup, so that each reads on its own.
 */

/** Every text/background pair below is at least 4.5:1; the lowest, white on a problem's deep red, is 6.6:1. */
export const STYLE = [
  'body{font-family:system-ui,sans-serif;margin:2em;color:#222;background:#fff}',
  'table{border-collapse:collapse;width:100%;margin-bottom:2em}',
  'th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #ddd;vertical-align:top}',
  '.bar{display:flex;width:24em;height:1.2em;background:#eee;border-radius:3px;overflow:hidden}',
  '.bar span{font-size:.8em;text-align:center;line-height:1.5em}',
  '.bar .applied{background:#c8e6c9;color:#1b3d1f}.bar .outstanding{background:#ffe082;color:#3d2e00}',
  '.bar .failed,.bar .unverified{background:#b71c1c;color:#fff;font-weight:bold}',
  '.detail{font-size:.85em;color:#444}.detail.problem{color:#b71c1c;font-weight:bold}.detail.waiting{color:#6b4a00}',
  '.when{color:#595959;font-size:.85em}',
  'tr.ok td{background:#f4faf4;color:#1a1a1a}tr.quiet td{background:#f5f5f5;color:#333}',
  'tr.waiting td{background:#fff4d6;color:#3d2e00}tr.waiting td:first-child{border-left:4px solid #e0a800}',
  'tr.problem td{background:#b71c1c;color:#fff;font-weight:bold}tr.problem td:first-child{border-left:4px solid #5f0000}',
  'tr.waiting .detail,tr.problem .detail{color:inherit}',
].join('');

/**
 * For each row, bar segment, heading and paragraph: the lowest WCAG contrast ratio between a
 * piece of its text and the background under it (the first one up the tree that is not
 * transparent, blended), written as `data-contrast`, and that pair as `data-colours` ("#ffffff
 * on #b71c1c"). Free of `<` and `&`, so that it needs no CDATA and reads the same to an XML and
 * an HTML parser.
 */
export const CONTRAST_SCRIPT = `(function () {
  function rgba(css) { var c = (css.match(/[0-9.]+/g) || []).map(Number); return c.length === 3 ? c.concat(1) : c; }
  function over(c, under) { return [0, 1, 2].map(function (i) { return c[i] * c[3] + under[i] * (1 - c[3]); }); }
  function background(el) {
    if (!el || el.nodeType !== 1) return [255, 255, 255];
    var c = rgba(getComputedStyle(el).backgroundColor);
    return c[3] === 1 ? c.slice(0, 3) : over(c, background(el.parentNode));
  }
  function linear(v) { var c = v / 255; return Math.min(c, 0.04045) === c ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); }
  function luminance(c) { return 0.2126 * linear(c[0]) + 0.7152 * linear(c[1]) + 0.0722 * linear(c[2]) + 0.05; }
  function hex(c) { return '#' + c.map(function (v) { return (256 + Math.round(v)).toString(16).slice(1); }).join(''); }
  function pair(el) {
    var bg = background(el), fg = over(rgba(getComputedStyle(el).color), bg), a = luminance(fg), b = luminance(bg);
    return { ratio: Math.max(a, b) / Math.min(a, b), colours: hex(fg) + ' on ' + hex(bg) };
  }
  function hasText(el) { return Array.prototype.some.call(el.childNodes, function (n) { return n.nodeType === 3 ? n.nodeValue.trim() !== '' : false; }); }
  Array.prototype.forEach.call(document.querySelectorAll('tr, .bar span, h1, h2, p'), function (el) {
    var texts = [el].concat(Array.prototype.slice.call(el.querySelectorAll('*'))).filter(hasText);
    var worst = texts.map(pair).sort(function (x, y) { return x.ratio - y.ratio; })[0];
    if (!worst) return;
    el.setAttribute('data-contrast', (Math.floor(worst.ratio * 100) / 100).toFixed(2));
    el.setAttribute('data-colours', worst.colours);
  });
})();`;
