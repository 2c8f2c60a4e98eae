import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { EpisodeResult } from "./episode.js";
import type { EpisodeSpec } from "./instances.js";
import { pyJsonDumps } from "./py.js";

/** Write a file atomically (temp file in the same directory, then rename). */
export function writeFileAtomic(path: string, content: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  writeFileSync(tmp, content);
  renameSync(tmp, path);
}

/** clemcore 3.x episode directory: `<results>/<model>/<game>/<experiment>/instance_<game_id:05d>`. */
export function episodeDir(resultsDir: string, modelDir: string, spec: EpisodeSpec): string {
  // clemcore formats game_id with :05d; textmapworld's string ids ("0") are padded the same way
  const id = String(spec.instance.game_id).padStart(5, "0");
  return join(resultsDir, modelDir, spec.game, spec.experiment.name, `instance_${id}`);
}

/**
 * Write an episode as clemcore does: `instance.json`, `interactions.json`, and `scores.json` (only when the
 * episode was scored), all `json.dump(indent=2, ensure_ascii=False)` with NaN as the bare token; plus
 * `experiment.json` one level up.
 */
export function writeEpisode(resultsDir: string, modelDir: string, spec: EpisodeSpec, result: EpisodeResult): string {
  const dir = episodeDir(resultsDir, modelDir, spec);
  writeFileAtomic(join(dirname(dir), "experiment.json"), pyJsonDumps(spec.experiment));
  writeFileAtomic(join(dir, "instance.json"), pyJsonDumps(spec.instance));
  if (result.interactions) {
    result.interactions.meta.results_folder = modelDir;
    writeFileAtomic(join(dir, "interactions.json"), pyJsonDumps(result.interactions));
  }
  if (result.scores) writeFileAtomic(join(dir, "scores.json"), pyJsonDumps(result.scores));
  if (result.error) writeFileAtomic(join(dir, "error.json"), pyJsonDumps({ error: result.error }));
  return dir;
}
