// Loading the definition files an adventuregame instance names (`action_definitions`, `room_definitions`,
// `entity_definitions`, `domain_definitions`) plus `grammar_core.json`, from the shipped data directory
// (`data/clembench/adventuregame/resources/`, copied from clembench a717f238).
import { readDataJson } from "../../data-dir.js";
import { InstanceError, ResourceError } from "../../errors.js";
import type { GameInstance } from "../../instances.js";
import type { AdventureDefinitions } from "./interpreter.js";

function fileList(instance: GameInstance, key: string): string[] {
  const v = instance[key];
  if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === "string" && x.endsWith(".json")))
    throw new InstanceError(`adventuregame/${instance.game_id}: "${key}" must be a non-empty list of .json file names`);
  return v as string[];
}

function readList(dataDir: string, file: string): Record<string, unknown>[] {
  const v = readDataJson<unknown>(dataDir, "adventuregame", "resources", "definitions", file);
  if (!Array.isArray(v)) throw new ResourceError(`adventuregame definitions ${file}: expected a list`);
  return v as Record<string, unknown>[];
}

/** Read every definition file the instance names (a file this package does not ship is a ResourceError). */
export function loadAdventureDefinitions(dataDir: string, instance: GameInstance): AdventureDefinitions {
  const domains = fileList(instance, "domain_definitions").map((f) => {
    const d = readDataJson<{ pddl_domain?: unknown }>(dataDir, "adventuregame", "resources", "definitions", f);
    if (typeof d.pddl_domain !== "string") throw new ResourceError(`adventuregame definitions ${f}: no pddl_domain`);
    return d.pddl_domain;
  });
  const core = readDataJson<{ grammar_head?: unknown; grammar_foot?: unknown }>(
    dataDir,
    "adventuregame",
    "resources",
    "grammar_core.json",
  );
  if (typeof core.grammar_head !== "string" || typeof core.grammar_foot !== "string")
    throw new ResourceError("adventuregame grammar_core.json: needs grammar_head and grammar_foot strings");
  return {
    entities: fileList(instance, "entity_definitions").flatMap((f) => readList(dataDir, f)),
    rooms: fileList(instance, "room_definitions").flatMap((f) => readList(dataDir, f)),
    actions: fileList(instance, "action_definitions").flatMap((f) => readList(dataDir, f)),
    domains,
    grammarCore: { grammar_head: core.grammar_head, grammar_foot: core.grammar_foot },
  };
}
