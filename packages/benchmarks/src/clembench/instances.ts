import { readDataJson, resolveDataDir } from "./data-dir.js";
import { InstanceError } from "./errors.js";

/** One game instance from `instances.json` (game-specific fields; `game_id` always present). */
/** textmapworld stores game_id as a string ("0"); the others as a number. */
export type GameInstance = { game_id: number | string } & Record<string, unknown>;

/** An experiment: its name, experiment-level config and instances. */
export type Experiment = { name: string; game_instances?: GameInstance[] } & Record<string, unknown>;

export interface InstancesFile {
  experiments: Experiment[];
}

/** One playable episode: the experiment (without its instance list) and one instance. */
export interface EpisodeSpec {
  game: string;
  experiment: Experiment;
  instance: GameInstance;
}

/** Validate the shape of an instances file. */
export function parseInstancesFile(raw: unknown, source: string): InstancesFile {
  const file = raw as InstancesFile;
  if (!file || !Array.isArray(file.experiments))
    throw new InstanceError(`${source}: expected {"experiments": [...]} at the top level`);
  for (const e of file.experiments) {
    if (typeof e.name !== "string") throw new InstanceError(`${source}: an experiment has no string "name"`);
    if (!Array.isArray(e.game_instances))
      throw new InstanceError(`${source}: experiment "${e.name}" has no "game_instances" list`);
    for (const inst of e.game_instances)
      if (typeof inst.game_id !== "number" && typeof inst.game_id !== "string")
        throw new InstanceError(`${source}: an instance of experiment "${e.name}" has no "game_id"`);
  }
  return file;
}

/** Load `data/clembench/<game>/instances.json`. */
export function loadInstances(game: string, dataDir?: string): InstancesFile {
  const dir = resolveDataDir(dataDir);
  return parseInstancesFile(readDataJson(dir, game, "instances.json"), `${game}/instances.json`);
}

/** Which instances to play: by experiment name and/or game_id, and/or the first N per experiment. */
export interface InstanceFilter {
  experiments?: string[];
  gameIds?: (number | string)[];
  /** Play at most this many instances per experiment (in file order). */
  limitPerExperiment?: number;
}

/** Flatten an instances file into episodes, in file order, after filtering. */
export function listEpisodes(game: string, file: InstancesFile, filter: InstanceFilter = {}): EpisodeSpec[] {
  const out: EpisodeSpec[] = [];
  for (const exp of file.experiments) {
    if (filter.experiments && !filter.experiments.includes(exp.name)) continue;
    const { game_instances, ...experiment } = exp;
    let n = 0;
    for (const instance of game_instances ?? []) {
      if (filter.gameIds && !filter.gameIds.some((id) => String(id) === String(instance.game_id))) continue;
      if (filter.limitPerExperiment !== undefined && n >= filter.limitPerExperiment) break;
      out.push({ game, experiment: experiment as Experiment, instance });
      n++;
    }
  }
  return out;
}

/** Read a required field of an instance or experiment, with a typed error naming it. */
export function field<T>(obj: Record<string, unknown>, key: string, where: string): T {
  if (!(key in obj)) throw new InstanceError(`${where}: missing field "${key}"`);
  return obj[key] as T;
}
