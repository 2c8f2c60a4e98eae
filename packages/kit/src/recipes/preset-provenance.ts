// Which values of an effective configuration follow the seed card and which are kiln's (or the user's),
// each with its reason: `kiln <recipe> --print-config`, `kiln presets` and `kiln repro` print it, so a
// preset never passes kiln's choices off as the seed's.
import {
  type ConfigOverrides,
  DEFAULT_SOURCES,
  RECIPE_PRESETS,
  type RecipeConfigOf,
  type RecipeName,
  resolveConfig,
} from "./presets.js";

/** One override layer over the recipe's default: a preset, the repro sizes, --quick. */
export interface ProvenanceLayer<C> {
  /** Short name printed with each value it sets ("tiny", "repro"). */
  label: string;
  overrides: ConfigOverrides<C>;
  /** Reason by path pattern; otherwise `about`. */
  why?: readonly (readonly [string, string])[];
  about: string;
}

export interface ValueSource {
  path: string;
  value: unknown;
  /** "seed 000", "kiln: …", "repro: …", "yours: --set / --config". */
  source: string;
  /** Whether the value is the seed card's. */
  fromCard: boolean;
}

/** `*` matches within one part; a pattern naming a section covers every field in it. */
export function pathMatches(pattern: string, path: string): boolean {
  const body = pattern
    .split(".")
    .map((part) => part.replace(/[\\^$+?()[\]{}|]/g, "\\$&").replace(/\*/g, "[^.]*"))
    .join("\\.");
  return new RegExp(`^${body}(\\..*)?$`).test(path);
}

function leaves(value: unknown, prefix: string, out: [string, unknown][]): [string, unknown][] {
  if (value !== null && typeof value === "object" && !Array.isArray(value))
    for (const [k, v] of Object.entries(value)) leaves(v, prefix ? `${prefix}.${k}` : k, out);
  else out.push([prefix, value]);
  return out;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const reasonFor = (rules: readonly (readonly [string, string])[] | undefined, path: string) =>
  rules?.find(([pattern]) => pathMatches(pattern, path))?.[1];

/**
 * The source of every value of `effective`: the last layer that changed it (with its reason), else the
 * default's (the seed card, or kiln's listed reason); a value no layer explains is the user's.
 */
export function configProvenance<R extends RecipeName>(
  recipe: R,
  layers: readonly ProvenanceLayer<RecipeConfigOf<R>>[],
  effective: RecipeConfigOf<R>,
): ValueSource[] {
  const { card, notFromCard, cardNotes } = DEFAULT_SOURCES[recipe];
  const stages = [RECIPE_PRESETS[recipe].defaults as RecipeConfigOf<R>];
  for (const layer of layers) stages.push(resolveConfig(stages[stages.length - 1], layer.overrides));
  const values = stages.map((c) => new Map(leaves(c, "", [])));
  return leaves(effective, "", [])
    .filter(([path]) => path !== "recipe")
    .map(([path, value]) => {
      const last = values[values.length - 1];
      if (path !== "seed" && !same(last.get(path), value))
        return { path, value, source: "yours: --set / --config", fromCard: false };
      for (let i = layers.length; i >= 1; i--)
        if (!same(values[i].get(path), values[i - 1].get(path))) {
          const layer = layers[i - 1];
          return {
            path,
            value,
            source: `${layer.label}: ${reasonFor(layer.why, path) ?? layer.about}`,
            fromCard: false,
          };
        }
      const note = reasonFor(cardNotes, path);
      if (note) return { path, value, source: `${card}: ${note}`, fromCard: true };
      const kiln = reasonFor(notFromCard, path);
      return { path, value, source: kiln ?? card, fromCard: kiln === undefined };
    });
}

/** The layers of a named recipe preset (none for the default itself). */
export function presetLayers<R extends RecipeName>(recipe: R, preset: string): ProvenanceLayer<RecipeConfigOf<R>>[] {
  const p = (RECIPE_PRESETS[recipe].presets as Record<string, ProvenanceLayer<RecipeConfigOf<R>> | undefined>)[preset];
  return p && Object.keys(p.overrides).length > 0 ? [{ ...p, label: preset }] : [];
}

const show = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));

/**
 * A short block: the values that follow the seed card (paths only), then kiln's and the user's
 * choices grouped by reason, each as path = value.
 */
export function provenanceBlock(title: string, sources: readonly ValueSource[]): string {
  const fromCard = sources.filter((s) => s.fromCard);
  const byReason = new Map<string, string[]>();
  for (const s of sources)
    if (!s.fromCard) byReason.set(s.source, [...(byReason.get(s.source) ?? []), `${s.path} = ${show(s.value)}`]);
  // A card value's source is the card, or "card: note".
  const cards = [...new Set(fromCard.map((s) => s.source.split(":")[0]))].join(", ");
  return [
    title,
    `  follows the seed card${cards ? ` (${cards})` : ""}, ${fromCard.length} values: ${fromCard.map((s) => s.path).join(", ") || "none"}`,
    `  kiln's or yours (${sources.length - fromCard.length} values):`,
    ...[...byReason].map(([reason, items]) => `    - ${reason}: ${items.join(", ")}`),
  ].join("\n");
}
