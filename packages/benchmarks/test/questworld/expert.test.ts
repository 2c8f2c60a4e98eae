// The scripted expert: 30/30 Core-3 on 20 seeds through the Policy path, and the whole
// chain from seeded wall states and other awkward reachable states.

import { describe, expect, it } from "vitest";
import {
  ARCHETYPES,
  ITEMS,
  PLACES,
  type ArchetypeId,
  type ItemId,
  QuestworldEnvironment,
  type QuestworldState,
  SPEC_LIMITS,
  evaluateCore3,
  expertFactory,
  expertPolicy,
  runQuestworldEpisode,
  seededStart,
  wallState,
} from "../../src/questworld/index.js";
import { nextInt, seedPrng } from "../../src/questworld/prng.js";

const seeds = Array.from({ length: 20 }, (_, i) => i);

async function finishFrom(state: QuestworldState, seed: number) {
  const env = new QuestworldEnvironment();
  const ep = await runQuestworldEpisode({ env, policy: expertPolicy(() => env.getState()), seed, state });
  return ep;
}

describe("scripted expert", () => {
  it("scores Core-3 30/30 on each of 20 seeds, end to end through the Policy interface", async () => {
    const result = await evaluateCore3({ policy: expertFactory, seeds });
    expect(result.perSeed.map((p) => p.total)).toEqual(seeds.map(() => 30));
    expect(result.score).toMatchObject({ mean: 30, se: 0, min: 30, max: 30 });
    for (const e of result.episodes) {
      expect(e.status).toBe("finished");
      expect(e.malformed).toBe(0);
      expect(e.toolCalls).toBeLessThanOrEqual(result.limits.toolCalls);
    }
    expect(result.wall.every((r) => r.passed === 60)).toBe(true);
    expect(result.wallStage).toBeNull();
  });

  it("emits assistant messages carrying OpenAI tool calls", async () => {
    const env = new QuestworldEnvironment({ archetype: "herbalist" });
    const ep = await runQuestworldEpisode({ env, policy: expertPolicy(() => env.getState()), seed: 3 });
    const assistant = ep.messages.filter((m) => m.role === "assistant");
    expect(assistant.length).toBe(ep.turns);
    for (const m of assistant) {
      expect(m.tool_calls).toHaveLength(1);
      expect(() => JSON.parse(m.tool_calls![0].function.arguments)).not.toThrow();
    }
    expect(ep.messages.filter((m) => m.role === "tool")).toHaveLength(ep.turns);
    expect(ep.rewards.reduce((a, b) => a + b, 0)).toBe(10);
  });

  it("passes the wall from seeded wall states (quest 2 accepted, foraging 1), even within the spec's 200 calls", async () => {
    const result = await evaluateCore3({
      policy: expertFactory,
      seeds: seeds.slice(0, 8),
      start: (a, s) => wallState(a, s),
      limits: SPEC_LIMITS,
    });
    for (const e of result.episodes) {
      expect(e.stages).toEqual({ timber_for_the_mill: 3, healers_remedy: 3, supper_at_the_lighthouse: 4 });
      expect(e.toolCalls).toBeLessThanOrEqual(200);
    }
  });

  const awkward: [string, (a: ArchetypeId, seed: number) => QuestworldState][] = [
    [
      "no tools, no coins, inventory full of junk",
      (a, seed) => seededStart(a, seed, { coins: 0, inventory: Array<ItemId>(20).fill("burnt_sprat"), place: "grove" }),
    ],
    [
      "quest 3 stage 3 at the lighthouse after eating the pie",
      (a, seed) =>
        seededStart(a, seed, {
          place: "lighthouse",
          coins: 0,
          inventory: [],
          stages: { timber_for_the_mill: 3, healers_remedy: 3, supper_at_the_lighthouse: 3 },
        }),
    ],
    [
      "quest 2 stage 2 with a full inventory holding the herbs",
      (a, seed) =>
        seededStart(a, seed, {
          place: "apothecary",
          inventory: ["mint", "mint", "sunroot", "sunroot", ...Array<ItemId>(16).fill("oak_log")],
          stages: { timber_for_the_mill: 3, healers_remedy: 2 },
        }),
    ],
    [
      "quest 1 stage 2 at the mill with woodcutting 1 and a pocket of birch logs",
      (a, seed) =>
        seededStart(a, seed, {
          place: "mill",
          inventory: ["birch_log", "birch_log"],
          levels: { woodcutting: 1 },
          stages: { timber_for_the_mill: 2 },
        }),
    ],
  ];

  it.each(awkward)("finishes the chain from: %s", async (_name, make) => {
    for (const a of ARCHETYPES) {
      for (const seed of [0, 1, 2]) {
        const ep = await finishFrom(make(a, seed), seed);
        expect(ep.status).toBe("finished");
        expect(ep.total).toBe(10);
      }
    }
  });

  it("finishes from random seeded starts without a single refused call", async () => {
    // Arbitrary valid states: any stage combination, place, coins, levels and inventory.
    const rng = seedPrng(2024);
    const pick = <T>(xs: readonly T[]) => xs[nextInt(rng, xs.length)];
    const chains = [
      [0, 0, 0],
      [1, 0, 0],
      [2, 0, 0],
      [3, 1, 0],
      [3, 2, 0],
      [3, 3, 0],
      [3, 3, 1],
      [3, 3, 2],
      [3, 3, 3],
    ];
    for (let trial = 0; trial < 30; trial++) {
      const [q1, q2, q3] = pick(chains);
      const place = pick(PLACES.filter((p) => p !== "lighthouse" || q3 >= 2));
      const inventory = Array.from({ length: nextInt(rng, 21) }, () => pick(ITEMS));
      const state = seededStart(pick(ARCHETYPES), trial, {
        place,
        coins: nextInt(rng, 40),
        inventory,
        levels: { woodcutting: 1 + nextInt(rng, 5), foraging: 1 + nextInt(rng, 6), fishing: 1 + nextInt(rng, 4) },
        stages: { timber_for_the_mill: q1, healers_remedy: q2, supper_at_the_lighthouse: q3 },
        limits: { toolCalls: 1000 },
      });
      const ep = await finishFrom(state, trial);
      expect({ trial, status: ep.status, errors: ep.counters.errors }).toEqual({
        trial,
        status: "finished",
        errors: 0,
      });
    }
  });
});
