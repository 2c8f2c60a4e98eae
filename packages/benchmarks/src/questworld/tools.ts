// The tools as JSON-schema function declarations in OpenAI's tool format
// (questworld.md, Tools). Enums carry the world's vocabulary, so a call naming an
// unknown place, NPC or item is a schema violation (a malformed call).

import type { ToolSchema } from "@kiln/rollout";
import { ITEMS } from "./items.js";
import { QUESTS } from "./quests.js";
import { NPCS, PLACES, RESOURCES } from "./world.js";

export const TOOL_NAMES = [
  "observe",
  "inventory",
  "skills",
  "quest_log",
  "move_to",
  "talk_to",
  "accept_quest",
  "gather",
  "craft",
  "buy",
  "sell",
  "eat",
  "drop",
] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

const str = (values: readonly string[], description: string) => ({ type: "string", enum: [...values], description });
const count = (description: string) => ({ type: "integer", minimum: 1, maximum: 20, description });

function tool(name: ToolName, description: string, properties: Record<string, unknown> = {}, required: string[] = []) {
  return {
    type: "function" as const,
    function: {
      name,
      description,
      parameters: { type: "object", properties, required, additionalProperties: false },
    },
  };
}

/** The 13 tool declarations, in a fixed order. */
export const TOOL_SCHEMAS: readonly ToolSchema[] = Object.freeze([
  tool("observe", "Look around: where you are, the exits and their cost in ticks, who is here, what can be gathered."),
  tool("inventory", "List your coins and the items in your 20 inventory slots."),
  tool("skills", "Show your skill levels and XP."),
  tool("quest_log", "Show every quest's stage and what to do next."),
  tool(
    "move_to",
    "Walk to a neighbouring place; costs the path's ticks.",
    {
      place: str(PLACES, "A place linked to where you are."),
    },
    ["place"],
  ),
  tool(
    "talk_to",
    "Talk to someone here. Quest givers offer quests; quest NPCs take the items a stage needs.",
    {
      npc: str(NPCS, "Someone at your place."),
    },
    ["npc"],
  ),
  tool(
    "accept_quest",
    "Accept a quest its giver has offered you (talk to them first).",
    {
      quest: str(QUESTS, "The quest to accept."),
    },
    ["quest"],
  ),
  tool(
    "gather",
    "One attempt to gather a resource here (2 ticks; may fail; success gives the item and XP).",
    {
      resource: str(RESOURCES, "A resource at your place."),
    },
    ["resource"],
  ),
  tool(
    "craft",
    "Craft at a station here. Cooking: kind 'cook', item 'raw_sprat', at the kitchen fire.",
    {
      kind: str(["cook"], "The kind of crafting."),
      item: str(ITEMS, "The raw item to work on."),
      count: count("How many to craft (default 1)."),
    },
    ["kind", "item"],
  ),
  tool(
    "buy",
    "Buy items from a shopkeeper here.",
    {
      npc: str(NPCS, "A shopkeeper at your place."),
      item: str(ITEMS, "The item to buy."),
      count: count("How many."),
    },
    ["npc", "item", "count"],
  ),
  tool(
    "sell",
    "Sell items to a shopkeeper here.",
    {
      npc: str(NPCS, "A shopkeeper at your place."),
      item: str(ITEMS, "The item to sell."),
      count: count("How many."),
    },
    ["npc", "item", "count"],
  ),
  tool("eat", "Eat an item from your inventory.", { item: str(ITEMS, "The item to eat.") }, ["item"]),
  tool(
    "drop",
    "Drop items from your inventory to free slots.",
    {
      item: str(ITEMS, "The item to drop."),
      count: count("How many (default 1)."),
    },
    ["item"],
  ),
]);

export function isToolName(name: unknown): name is ToolName {
  return typeof name === "string" && (TOOL_NAMES as readonly string[]).includes(name);
}

export function schemaOf(name: ToolName): ToolSchema {
  return TOOL_SCHEMAS.find((t) => t.function.name === name)!;
}
