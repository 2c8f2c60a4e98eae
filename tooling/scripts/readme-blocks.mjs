// The README check's parser: every fenced block of a README is either runnable (ts/js/sh) or says why not.
//
//   ```ts / ```js / ```sh        run in a scratch project where the package is installed from its tarball
//   ```text (or json, jinja, …)  not code to run: what it shows is output, a synopsis or a file
//   <!-- readme-check: skip: WHY -->             on the line(s) above a ts/js/sh fence: not run, and why
//   <!-- readme-check: install @kiln/a @kiln/b -->  anywhere: the README's blocks need these packages as well
//
// A fence without a language is an error, so every block says what it is.

const RUN = new Map([
  ["ts", "ts"],
  ["typescript", "ts"],
  ["js", "js"],
  ["javascript", "js"],
  ["mjs", "js"],
  ["sh", "sh"],
  ["bash", "sh"],
  ["shell", "sh"],
]);

/**
 * @param {string} markdown
 * @param {string} label  file name for messages
 * @returns {{ blocks: { kind: "ts" | "js" | "sh" | null, lang: string, code: string, line: number, skip: string | null }[], install: string[] }}
 */
export function readmeBlocks(markdown, label) {
  const lines = markdown.split("\n");
  const blocks = [];
  const install = [];
  for (const m of markdown.matchAll(/<!--\s*readme-check:\s*install\s+([^>]*?)\s*-->/g)) {
    install.push(...m[1].split(/\s+/).filter(Boolean));
  }
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)(.*)$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    const body = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      if (lines[j].trim().startsWith(fence) && lines[j].trim().replace(/[`~]/g, "") === "") break;
      body.push(indent && lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j]);
    }
    if (j === lines.length) throw new Error(`${label}:${i + 1}: code fence is never closed`);
    if (lang === "") {
      throw new Error(
        `${label}:${i + 1}: code block without a language; mark it ts/js/sh (run) or text (not run) so the README check knows`,
      );
    }
    let k = i - 1;
    while (k >= 0 && (lines[k].trim() === "" || /readme-check:\s*install/.test(lines[k]))) k--;
    const marker = k >= 0 ? /<!--\s*readme-check:\s*skip:\s*(.*?)\s*-->/.exec(lines[k]) : null;
    const skip = marker ? marker[1] : null;
    if (skip !== null && skip.length < 3) throw new Error(`${label}:${i + 1}: "readme-check: skip:" needs a reason`);
    blocks.push({
      kind: RUN.get(lang.toLowerCase()) ?? null,
      lang,
      code: body.join("\n"),
      line: i + 1,
      skip,
    });
    i = j;
  }
  return { blocks, install };
}
