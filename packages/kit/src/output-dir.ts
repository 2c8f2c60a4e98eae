// Writing a model or adapter directory: never over one of the command's inputs (an --out that is,
// contains or lies inside an input is refused before anything is read), and never half-written (the
// files go to a temporary directory beside the output, renamed into place when complete).
import { existsSync, readdirSync, realpathSync, renameSync, rmSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";

/** An output that would overwrite an input, or an existing output without permission to replace it. */
export class OutputDirError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OutputDirError";
  }
}

/** The path with symlinks resolved as far as it exists (a missing tail is appended as given). */
function canonical(path: string): string {
  const abs = resolve(path);
  let head = abs;
  const tail: string[] = [];
  while (!existsSync(head)) {
    const parent = dirname(head);
    if (parent === head) return abs;
    tail.unshift(basename(head));
    head = parent;
  }
  return join(realpathSync(head), ...tail);
}

function within(inner: string, outer: string): boolean {
  const rel = relative(outer, inner);
  return rel === "" || (rel.split(sep)[0] !== ".." && !isAbsolute(rel));
}

export interface NamedPath {
  /** How the user gave it ("the base model", "--adapter"). */
  label: string;
  path: string;
}

/** Refuse an output that is, contains or lies inside one of the inputs. */
export function checkOutputSeparate(out: string, inputs: readonly NamedPath[], outLabel = "--out"): void {
  const o = canonical(out);
  for (const input of inputs) {
    const i = canonical(input.path);
    const how = o === i ? "is" : within(o, i) ? "is inside" : within(i, o) ? "contains" : undefined;
    if (how)
      throw new OutputDirError(
        `${outLabel} ${out} ${how} ${input.label} ${input.path}: writing there would destroy an input; choose another ${outLabel}`,
      );
  }
}

/**
 * Write a directory by `write(tmpDir)` into a temporary directory beside `out`, then rename it into
 * place. An existing non-empty `out` is refused unless `overwrite` (then it is replaced only once the new
 * one is complete). Inputs are checked first (checkOutputSeparate).
 */
export async function writeDirAtomic<T>(
  out: string,
  options: { inputs?: readonly NamedPath[]; overwrite?: boolean; outLabel?: string },
  write: (tmpDir: string) => Promise<T>,
): Promise<T> {
  const label = options.outLabel ?? "--out";
  checkOutputSeparate(out, options.inputs ?? [], label);
  const target = resolve(out);
  const exists = existsSync(target);
  if (exists && !statSync(target).isDirectory()) throw new OutputDirError(`${label} ${out} is a file, not a directory`);
  if (exists && readdirSync(target).length > 0 && !options.overwrite)
    throw new OutputDirError(`${label} ${out} already exists and is not empty: choose a new one or pass --overwrite`);
  const tmp = join(dirname(target), `.${basename(target)}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  try {
    const result = await write(tmp);
    if (exists) {
      const old = join(dirname(target), `.${basename(target)}.old-${process.pid}`);
      renameSync(target, old);
      renameSync(tmp, target);
      rmSync(old, { recursive: true, force: true });
    } else renameSync(tmp, target);
    return result;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
