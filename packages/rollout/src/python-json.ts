// `json.dumps(x, ensure_ascii=False)` as Python prints it, which is what the Qwen chat
// templates' `tojson` filter produces (docs/NUMERICS.md §6.3: transformers overrides tojson so JSON
// uses ", " and ": " separators, keeps key order and non-ASCII characters). Used to render
// tool calls exactly as the models saw them in training.

export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
    return JSON.stringify(value);
  }
  if (typeof value === "boolean") return value ? "true" : "false";
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(", ")}]`;
  if (typeof value === "object") {
    const parts = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pythonJsonDumps(v)}`);
    return `{${parts.join(", ")}}`;
  }
  return JSON.stringify(String(value));
}
