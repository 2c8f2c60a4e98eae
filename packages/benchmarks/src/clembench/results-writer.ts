import * as fs from "node:fs";
import { dirname, join } from "node:path";
import { writeFileAtomicSync } from "@kiln/hub-io";
import type { EpisodeResult } from "./episode.js";
import type { EpisodeSpec } from "./instances.js";
import { pyJsonDumps } from "./py.js";

/** Write a results file atomically (hub-io's temp + fsync + rename). */
export function writeResultFile(path: string, content: string): void {
  writeFileAtomicSync(fs, path, content);
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
  writeResultFile(join(dirname(dir), "experiment.json"), pyJsonDumps(spec.experiment));
  writeResultFile(join(dir, "instance.json"), pyJsonDumps(spec.instance));
  if (result.interactions) {
    result.interactions.meta.results_folder = modelDir;
    writeResultFile(join(dir, "interactions.json"), pyJsonDumps(result.interactions));
  }
  if (result.scores) writeResultFile(join(dir, "scores.json"), pyJsonDumps(result.scores));
  if (result.error) writeResultFile(join(dir, "error.json"), pyJsonDumps({ error: result.error }));
  return dir;
}
