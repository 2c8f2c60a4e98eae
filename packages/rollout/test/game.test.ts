import { describe, expect, it } from "vitest";
import {
  type Action,
  type GameMaster,
  type GameStepResult,
  runGame,
  ScriptedPolicy,
  trajectoryMessages,
  trajectorySchema,
} from "../src/index.js";

/** Teller says a word, echoer repeats it; three rounds; one point per exact echo. */
class EchoGame implements GameMaster<{ round: number; turn: "teller" | "echoer"; word: string; points: number }> {
  readonly id = "echo";
  readonly version = "1";
  private s = { round: 0, turn: "teller" as "teller" | "echoer", word: "", points: 0 };
  players() {
    return ["teller", "echoer"];
  }
  tools() {
    return [];
  }
  reset() {
    this.s = { round: 0, turn: "teller", word: "", points: 0 };
    return {
      messages: {
        teller: [{ role: "user" as const, content: "Say one word." }],
        echoer: [{ role: "user" as const, content: "Repeat the word you hear." }],
      },
    };
  }
  nextPlayer() {
    return this.s.round >= 3 ? null : this.s.turn;
  }
  step(player: string, action: Action): GameStepResult {
    const text = action.message.content ?? "";
    if (player === "teller") {
      this.s.word = text;
      this.s.turn = "echoer";
      return { observations: { echoer: [{ role: "user", content: `Word: ${text}` }] }, reward: 0, done: false };
    }
    const ok = text === this.s.word;
    if (ok) this.s.points++;
    this.s.round++;
    this.s.turn = "teller";
    const verdict = ok ? "match" : "miss";
    return {
      observations: {
        teller: [{ role: "user", content: `Echo was a ${verdict}. Next word.` }],
        echoer: [{ role: "user", content: verdict }],
      },
      reward: ok ? 1 : 0,
      done: this.s.round >= 3,
    };
  }
  getState() {
    return structuredClone(this.s);
  }
  score() {
    return { score: this.s.points / 3 };
  }
}

describe("runGame", () => {
  it("drives two policies through a game master with per-player conversations", async () => {
    const words = ["apple", "river", "stone", "cloud"];
    const teller = new ScriptedPolicy({ id: "teller", script: ({ rng }) => words[Math.floor(rng() * words.length)] });
    // The echoer mishears the second word.
    const echoer = new ScriptedPolicy({
      id: "echoer",
      script: ({ messages }) => {
        const heard = messages.filter((m) => m.content?.startsWith("Word: "));
        const w = heard.at(-1)!.content!.slice(6);
        return heard.length === 2 ? w.toUpperCase() : w;
      },
    });
    const traj = await runGame({ game: new EchoGame(), policies: { teller, echoer }, seed: 3 });
    expect(trajectorySchema.safeParse(traj).success).toBe(true);
    expect(traj.outcome.status).toBe("done");
    expect(traj.turns.map((t) => t.player)).toEqual(["teller", "echoer", "teller", "echoer", "teller", "echoer"]);
    expect(traj.outcome.totalReward).toBe(2);
    expect(traj.outcome.score).toBeCloseTo(2 / 3);
    expect(traj.policyId).toBe("teller=teller,echoer=echoer");
    const echoView = trajectoryMessages(traj, "echoer");
    expect(echoView[0].content).toBe("Repeat the word you hear.");
    expect(echoView.filter((m) => m.role === "assistant")).toHaveLength(3);
    expect(echoView.some((m) => m.content === "miss")).toBe(true);
    const tellerView = trajectoryMessages(traj, "teller");
    expect(tellerView.some((m) => m.content?.startsWith("Word: "))).toBe(false);
    expect(() => trajectoryMessages(traj, "nobody")).toThrow(/no player "nobody"/);
  });

  it("answers a player's malformed reply to that player only and stops at the per-player limit", async () => {
    const broken = new ScriptedPolicy({ id: "broken", script: () => '<tool_call>{"name": "say", "arguments": {' });
    const echoer = new ScriptedPolicy({ id: "echoer", script: () => "never asked" });
    const traj = await runGame({
      game: new EchoGame(),
      policies: { teller: broken, echoer },
      seed: 1,
      limits: { maxConsecutiveMalformed: 2 },
    });
    expect(traj.outcome.status).toBe("malformed_limit");
    expect(traj.turns.map((t) => t.player)).toEqual(["teller", "teller"]);
    expect(traj.turns[0].toolCallIssues[0].kind).toBe("unclosed_tag");
    expect(Object.keys(traj.turns[0].observationsByPlayer!)).toEqual(["teller"]);
    expect(trajectoryMessages(traj, "echoer")).toHaveLength(1);
    expect(traj.stats.malformedCalls).toEqual({ unclosed_tag: 2 });
  });

  it("refuses a game without a policy for every player", async () => {
    const p = new ScriptedPolicy({ id: "x", script: () => "hi" });
    await expect(runGame({ game: new EchoGame(), policies: { teller: p }, seed: 1 })).rejects.toThrow(
      /no policy for player "echoer"/,
    );
  });
});
