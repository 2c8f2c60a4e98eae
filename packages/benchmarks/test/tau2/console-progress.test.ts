import { describe, expect, it } from "vitest";
import { type Tau2EpisodeResult, type Tau2Progress, consoleProgress } from "../../src/tau2/index.js";

function progressAt(done: number, total: number): Tau2Progress {
  const last = {
    taskId: String(done),
    trial: 0,
    terminationReason: "agent_stop",
    reward: 1,
  } as unknown as Tau2EpisodeResult;
  return { done, total, successes: done, last };
}

describe("tau2 consoleProgress", () => {
  it("when not a TTY prints at most one line per interval or per 10 %, plus the final line", () => {
    const lines: string[] = [];
    let clock = 0;
    const report = consoleProgress({ write: (t: string) => lines.push(t) }, { logEveryMs: 10_000, now: () => clock });
    const total = 200;
    for (let done = 1; done <= total; done++) {
      clock += 100; // 20 s for the whole run: the interval alone would allow 2 lines
      report(progressAt(done, total));
    }
    // first update, each 10 % step (20, 40, …, 180) and the final 200/200
    expect(lines.length).toBe(11);
    expect(lines.every((l) => l.endsWith("\n") && !l.includes("\r"))).toBe(true);
    expect(lines[0]).toContain(" 1/200 ");
    expect(lines.at(-1)).toContain(" 200/200 ");
  });

  it("when not a TTY prints on the interval between slow 10 % steps", () => {
    const lines: string[] = [];
    let clock = 0;
    const report = consoleProgress({ write: (t: string) => lines.push(t) }, { logEveryMs: 10_000, now: () => clock });
    for (let done = 1; done <= 1000; done++) {
      clock += 1000; // one episode per second: 10 s elapse before 1 % more is done
      report(progressAt(done, 1000));
    }
    // one line per 10 s (100 of them) — never one per episode
    expect(lines.length).toBeGreaterThanOrEqual(100);
    expect(lines.length).toBeLessThanOrEqual(111);
    expect(lines.at(-1)).toContain(" 1000/1000 ");
  });

  it("redraws every update in place on a TTY", () => {
    const lines: string[] = [];
    const report = consoleProgress({ write: (t: string) => lines.push(t), isTTY: true }, { now: () => 0 });
    for (let done = 1; done <= 5; done++) report(progressAt(done, 5));
    expect(lines.length).toBe(5);
    expect(lines.every((l) => l.startsWith("\r"))).toBe(true);
    expect(lines.at(-1)?.endsWith("\n")).toBe(true);
  });
});
