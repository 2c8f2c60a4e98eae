// The chat templates' `tojson` filter: Python's `json.dumps(x, ensure_ascii=False)` — ", " and ": "
// separators, key order kept, non-ASCII kept (docs/NUMERICS.md §6.3). Used to render tool calls and tool
// declarations exactly as the models saw them in training. The serialiser itself is hub-io's, the one
// that also writes Hugging Face config files.
import { pythonJsonDumps as pythonJsonText } from "@kiln/hub-io";

export function pythonJsonDumps(value: unknown): string {
  return pythonJsonText(value, { ensureAscii: false });
}
