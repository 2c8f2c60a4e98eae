import { clembench } from "@kiln/benchmarks";
import { describe, expect, it } from "vitest";
import { isHeldOutInstance } from "../../src/agent-model/clem-split.js";
import {
  copyDrillLine,
  copyDrills,
  spellingDrillLine,
  spellingDrillWords,
  spellingDrills,
} from "../../src/agent-model/drills.js";

const tabooTargets = () =>
  clembench
    .loadInstances("taboo")
    .experiments.flatMap((e) => (e.game_instances ?? []) as unknown as { target_word: string }[])
    .map((t) => t.target_word.toLowerCase());

describe("spelling drills", () => {
  it("never drill a held-out taboo target, and drill every training one", () => {
    const words = new Set(spellingDrillWords(0));
    const targets = tabooTargets();
    const heldOut = targets.filter((_, i) => isHeldOutInstance(i));
    expect(heldOut.length).toBe(12);
    for (const t of heldOut) expect(words.has(t)).toBe(false);
    for (const w of targets.filter((word, i) => !isHeldOutInstance(i) && /^[a-z]{2,14}$/.test(word)))
      expect(words.has(w)).toBe(true);
    expect(words.size).toBeGreaterThan(2000);
  });

  it("spell and reverse letter by letter", () => {
    expect(spellingDrillLine("winter", 0)).toBe("winter is spelled w i n t e r.");
    expect(spellingDrillLine("winter", 1)).toBe("winter backwards is retniw.");
    expect(spellingDrillLine("winter", 2)).toBe("retniw backwards is winter.");
  });

  it("are plain text, seeded, and go through every word before repeating one", () => {
    const a = spellingDrills({ seed: 1, documents: 40, linesPerDocument: 10 });
    expect(spellingDrills({ seed: 1, documents: 40, linesPerDocument: 10 })).toEqual(a);
    expect(spellingDrills({ seed: 2, documents: 40, linesPerDocument: 10 })).not.toEqual(a);
    expect(a.every((d) => d.text !== undefined && d.messages === undefined && d.game === "drills/spelling")).toBe(true);
    const lines = a.flatMap((d) => (d.text ?? "").split("\n"));
    expect(lines.length).toBe(400);
    const words = new Set(spellingDrillWords(1));
    const subjects = lines.map((l) => {
      const spelled = /^([a-z]+) is spelled ([a-z ]+)\.$/.exec(l);
      if (spelled) {
        expect(spelled[2].split(" ").join("")).toBe(spelled[1]);
        return spelled[1];
      }
      const [, left, right] = /^([a-z]+) backwards is ([a-z]+)\.$/.exec(l) ?? [];
      expect([...left].reverse().join("")).toBe(right);
      return words.has(left) ? left : right;
    });
    expect(subjects.every((w) => words.has(w))).toBe(true);
    expect(new Set(subjects).size).toBe(400); // 400 < the word count: no word twice
  });
});

describe("copy drills", () => {
  const words = ["apple", "stone", "river", "cloud", "amber", "flint", "maple", "ocean"];

  it("say a list again, clue a word reversed, name the next candidate not yet asked", () => {
    expect(copyDrillLine(words, 0, 0)).toBe(
      "list: apple, stone, river, cloud, amber. again: apple, stone, river, cloud, amber.",
    );
    expect(copyDrillLine(words, 1, 0)).toBe("word: apple. avoid: stone, river, cloud. clue: elppa backwards.");
    expect(copyDrillLine(words, 2, 0)).toBe(
      "candidates: ['Apple', 'Stone', 'River', 'Cloud', 'Amber', 'Flint', 'Maple', 'Ocean']. asked: none. next: Apple.",
    );
    expect(copyDrillLine(words, 2, 3)).toMatch(/asked: Apple, Stone, River\. next: Cloud\.$/);
  });

  it("are seeded plain text whose answers are copies of words earlier in the line", () => {
    const a = copyDrills({ seed: 3, documents: 20, linesPerDocument: 6 });
    expect(copyDrills({ seed: 3, documents: 20, linesPerDocument: 6 })).toEqual(a);
    expect(copyDrills({ seed: 4, documents: 20, linesPerDocument: 6 })).not.toEqual(a);
    const lines = a.flatMap((d) => (d.text ?? "").split("\n"));
    expect(lines.length).toBe(120);
    const kinds = new Set<number>();
    for (const l of lines) {
      const repeat = /^list: (.+)\. again: (.+)\.$/.exec(l);
      const clue = /^word: ([a-z]+)\. avoid: .+\. clue: ([a-z]+) backwards\.$/.exec(l);
      const next = /^candidates: \[(.+)\]\. asked: (.+)\. next: (\w+)\.$/.exec(l);
      if (repeat) {
        kinds.add(0);
        expect(repeat[2]).toBe(repeat[1]);
      } else if (clue) {
        kinds.add(1);
        expect([...clue[1]].reverse().join("")).toBe(clue[2]);
      } else {
        expect(next).not.toBeNull();
        kinds.add(2);
        const names = (next?.[1] ?? "").split(", ").map((n) => n.slice(1, -1));
        const asked = next?.[2] === "none" ? [] : (next?.[2] ?? "").split(", ");
        expect(names.slice(0, asked.length)).toEqual(asked);
        expect(next?.[3]).toBe(names[asked.length]);
      }
    }
    expect(kinds.size).toBe(3);
  });
});
