import { describe, expect, it } from "vitest";
import {
  formatDuration,
  GuessNumberEnv,
  guessNumberScript,
  ProgressBar,
  runEpisodes,
  ScriptedPolicy,
} from "../src/index.js";

function sink(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, stream: { isTTY, columns: 100, write: (t: string) => writes.push(t) } };
}

describe("ProgressBar", () => {
  it("redraws one line on a TTY with rate and ETA, throttled", () => {
    let now = 0;
    const { writes, stream } = sink(true);
    const bar = new ProgressBar({ total: 10, label: "eps", stream, now: () => now, redrawMs: 100 });
    now = 1000;
    bar.tick(2);
    now = 1050;
    bar.tick(1); // within 100 ms: no redraw
    now = 2000;
    bar.tick(1, { errors: 1 });
    bar.finish();
    expect(writes).toHaveLength(3);
    expect(writes[0].startsWith("\r\u001b[2K[")).toBe(true);
    expect(writes[0]).toMatch(/\[#+-+\] eps 2\/10 20% 2\.0\/s ETA 4s$/);
    expect(writes[1]).toContain("eps 4/10 40% 2.0/s ETA 3s errors=1");
    expect(writes[2].endsWith("\n")).toBe(true);
  });

  it("shows values as they are now beside the summed tallies", () => {
    const { writes, stream } = sink(false);
    const bar = new ProgressBar({ total: 3, stream, now: () => 0, logEveryMs: 0 });
    bar.show({ loss: "2.500" });
    bar.tick(1, { errors: 1 });
    bar.show({ loss: "1.250" });
    bar.tick(1, { errors: 1 });
    expect(writes.at(-1)).toMatch(/ errors=2 loss=1\.250\n$/); // the loss replaced, not 3.75
  });

  it("prints plain lines at most every logEveryMs when not a TTY", () => {
    let now = 0;
    const { writes, stream } = sink(false);
    const bar = new ProgressBar({ total: 100, stream, now: () => now, logEveryMs: 5000 });
    for (let i = 0; i < 100; i++) {
      now += 100;
      bar.tick();
    }
    bar.finish();
    expect(writes.every((w) => !w.includes("\r") && w.endsWith("\n"))).toBe(true);
    expect(writes.length).toBe(3); // first tick, +5 s, final
    expect(writes.at(-1)).toBe("100/100 100% 10.0/s\n");
  });

  it("formats durations and is used by the runner", async () => {
    expect(formatDuration(59)).toBe("59s");
    expect(formatDuration(61)).toBe("1m01s");
    expect(formatDuration(3700)).toBe("1h01m");
    const { writes, stream } = sink(false);
    await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: new ScriptedPolicy({ script: guessNumberScript() }),
      episodes: 5,
      progress: stream,
      label: "guess",
    });
    expect(writes.at(-1)).toMatch(/^guess 5\/5 100% /);
  });
});
