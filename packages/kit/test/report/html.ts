// A strict little HTML/SVG parser for the report tests: tags must nest and close (void elements and
// "/>" excepted), attributes are double-quoted. Enough to query the pages kit writes, which escape
// every text; it throws on anything it cannot place, so a malformed page fails the test.
export interface HtmlNode {
  tag: string;
  attrs: Record<string, string>;
  children: HtmlNode[];
  text: string;
}

const VOID = new Set(["meta", "br", "hr", "img", "input", "link", "col", "area", "base", "source", "wbr"]);

export function parseHtml(html: string): HtmlNode {
  const root: HtmlNode = { tag: "#root", attrs: {}, children: [], text: "" };
  const stack = [root];
  const re =
    /<!--[\s\S]*?-->|<!doctype[^>]*>|<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+(?:="[^"]*")?)*)\s*(\/?)>|([^<]+)|(<)/gi;
  for (const m of html.matchAll(re)) {
    const [all, close, tag, attrText, selfClose, text, stray] = m;
    if (stray) throw new Error(`stray "<" at ${m.index}: ${html.slice(m.index, (m.index ?? 0) + 40)}`);
    if (text !== undefined) {
      stack[stack.length - 1].text += text;
      continue;
    }
    if (!tag) continue; // comment or doctype
    const name = tag.toLowerCase();
    if (close) {
      const open = stack.pop();
      if (!open || open.tag !== name) throw new Error(`</${name}> closes <${open?.tag}> at ${m.index}`);
      continue;
    }
    const attrs: Record<string, string> = {};
    for (const a of (attrText ?? "").matchAll(/([\w:-]+)(?:="([^"]*)")?/g)) attrs[a[1]] = a[2] ?? "";
    const node: HtmlNode = { tag: name, attrs, children: [], text: "" };
    stack[stack.length - 1].children.push(node);
    if (!selfClose && !VOID.has(name)) stack.push(node);
    void all;
  }
  if (stack.length !== 1) throw new Error(`unclosed <${stack[stack.length - 1].tag}>`);
  return root;
}

export function findAll(node: HtmlNode, pred: (n: HtmlNode) => boolean): HtmlNode[] {
  const out: HtmlNode[] = [];
  const walk = (n: HtmlNode) => {
    if (pred(n)) out.push(n);
    for (const c of n.children) walk(c);
  };
  walk(node);
  return out;
}

export const hasClass = (n: HtmlNode, cls: string) => (n.attrs.class ?? "").split(/\s+/).includes(cls);

/** All text inside a node, children included. */
export function textOf(n: HtmlNode): string {
  return n.text + n.children.map(textOf).join("");
}
