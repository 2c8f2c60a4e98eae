import {
  type EpisodeResult,
  type GameDefinition,
  getGame,
  listEpisodes,
  loadInstances,
  type PlayerBackend,
  playEpisode,
  PyFloat,
  resolveDataDir,
} from "../../src/clembench/index.js";

export const dataDir = resolveDataDir();

/** The spec of one instance (by experiment index and position). */
export function spec(game: string, exp = 0, idx = 0) {
  const file = loadInstances(getGame(game).dataPath ?? game, dataDir);
  const e = file.experiments[exp];
  return listEpisodes(game, file, { experiments: [e.name] })[idx];
}

export async function play(def: GameDefinition, backends: PlayerBackend[], exp = 0, idx = 0): Promise<EpisodeResult> {
  return playEpisode(def, spec(def.name, exp, idx), backends, { dataDir });
}

export function ep(r: EpisodeResult): Record<string, unknown> {
  if (!r.scores) throw new Error(`no scores: ${r.error}`);
  // unwrap Python floats so tests compare plain numbers
  return Object.fromEntries(
    Object.entries(r.scores["episode scores"]).map(([k, v]) => [k, v instanceof PyFloat ? v.value : v]),
  );
}

/** Contents sent to a player, in order (GM → player "send message" events). */
export function sentTo(r: EpisodeResult, player: string): string[] {
  return (r.interactions?.turns ?? [])
    .flat()
    .filter((e) => e.from === "GM" && e.to === player && e.action.type === "send message")
    .map((e) => String(e.action.content));
}

export function gmEvents(r: EpisodeResult, type: string): unknown[] {
  return (r.interactions?.turns ?? [])
    .flat()
    .filter((e) => e.from === "GM" && e.to === "GM" && e.action.type === type)
    .map((e) => e.action.content);
}
