export interface ReadmeBlock {
  /** How the README check runs it; null for blocks that are not code to run (text, json, …). */
  kind: "ts" | "js" | "sh" | null;
  lang: string;
  code: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The reason given by `<!-- readme-check: skip: … -->` above the fence, or null. */
  skip: string | null;
}
export function readmeBlocks(markdown: string, label: string): { blocks: ReadmeBlock[]; install: string[] };
