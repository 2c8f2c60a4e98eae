// Python's `string.Template(text).substitute(**mapping)`, which codenames fills its prompt templates with.
import { ResourceError } from "../../errors.js";

const PATTERN = /\$(?:(\$)|([_a-z][_a-z0-9]*)|\{([_a-z][_a-z0-9]*)\}|())/gi;

/** `$$` → `$`, `$name` / `${name}` → mapping[name]; an unknown name or a stray `$` is an error, as in Python. */
export function templateSubstitute(text: string, mapping: Record<string, string>, source = "template"): string {
  return text.replace(PATTERN, (_m, escaped, named, braced, _invalid, offset: number) => {
    if (escaped !== undefined) return "$";
    const name = named ?? braced;
    if (name === undefined) throw new ResourceError(`${source}: invalid placeholder at offset ${offset}`);
    if (!(name in mapping)) throw new ResourceError(`${source}: no value for placeholder $${name}`);
    return mapping[name];
  });
}
