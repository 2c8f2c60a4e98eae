// Rule-following scripted players: they play every implemented game by its rules (and can win), so the
// harness can be tested end to end without a model. They read only what the GM shows them.
import { wordleFeedback } from "./games/wordle-feedback.js";
import type { GameInstance } from "./instances.js";
import { type ChatTurn, type Context, ScriptedBackend } from "./player.js";

function lastUser(messages: ChatTurn[]): string {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === "user") return messages[i].content;
  return "";
}

/** Among the candidates, the word whose feedback splits the others into the most groups (ties: first). */
function pickGuess(candidates: string[]): string | undefined {
  if (candidates.length <= 2) return candidates[0];
  let pool = candidates;
  if (pool.length > 300) {
    // rank by letter frequency first to keep the quadratic step small
    const freq = new Map<string, number>();
    for (const w of pool) for (const c of new Set(w)) freq.set(c, (freq.get(c) ?? 0) + 1);
    const score = (w: string) => [...new Set(w)].reduce((a, c) => a + (freq.get(c) ?? 0), 0);
    pool = [...pool].sort((a, b) => score(b) - score(a)).slice(0, 100);
  }
  let best = pool[0];
  let bestGroups = -1;
  for (const g of pool) {
    const groups = new Set(candidates.map((w) => wordleFeedback(g, w))).size;
    if (groups > bestGroups) {
      best = g;
      bestGroups = groups;
    }
  }
  return best;
}

/**
 * A Wordle solver: keeps the words consistent with every colour feedback seen so far and guesses the one that
 * best splits them (starting with `opener`). After a critic's comment it repeats its guess.
 */
export function wordleSolver(wordList: readonly string[], opener = "crane"): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const history: [string, string][] = [];
    let lastGuess: string | null = null;
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i];
      if (m.role === "assistant") {
        const g = /guess:\s*(\S+)/i.exec(m.content);
        if (g) lastGuess = g[1].toLowerCase();
      } else if (lastGuess) {
        const fb = /guess_feedback: (.*)/.exec(m.content);
        if (fb) history.push([lastGuess, fb[1]]);
      }
    }
    const ctx = lastUser(messages);
    if (ctx.includes("guess_agreement:") && lastGuess)
      return `explanation: the critic has spoken, I keep my guess\nguess: ${lastGuess}`;
    const candidates = wordList.filter((w) => history.every(([g, fb]) => wordleFeedback(g, w) === fb));
    const guess = history.length === 0 ? opener : (pickGuess(candidates) ?? opener);
    return `explanation: ${candidates.length} words fit the feedback\nguess: ${guess}`;
  });
}

/** A Wordle critic that always agrees. */
export function agreeingCritic(): ScriptedBackend {
  return new ScriptedBackend(() => "explanation: the guess fits the clue\nagreement: yes");
}

/** Taboo describer: spells the target backwards ("CLUE: retniw backwards"), which shares no stem with it. */
export function reversingDescriber(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const m = /needs to guess:\n\n(.+)\n/.exec(messages[0]?.content ?? "");
    const target = m ? m[1].trim() : "";
    return `CLUE: ${[...target].reverse().join("")} backwards`;
  });
}

/** Taboo guesser for `reversingDescriber`: reverses the first clue word. */
export function reversingGuesser(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const clue = /CLUE: (\S+)/.exec(lastUser(messages));
    return `GUESS: ${clue ? [...clue[1]].reverse().join("") : "nothing"}`;
  });
}

function gridsAfter(text: string, labels: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const label of labels) {
    const m = new RegExp(`${label}:\\n\\n((?:.+\\n?){5})`).exec(text);
    if (m) out[label] = m[1].trim();
  }
  return out;
}

/** referencegame giver: the target grid itself, rows joined by " / ", on one line. */
export function gridReadingGiver(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const g = gridsAfter(messages[0].content, ["Target grid"])["Target grid"] ?? "";
    return `Expression: ${g.split("\n").join(" / ")}`;
  });
}

/** referencegame follower: finds the grid that equals the expression. */
export function gridMatchingFollower(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const text = lastUser(messages);
    const grids = gridsAfter(text, ["First", "Second", "Third"]);
    const expr = /Expression: (.+)/.exec(text)?.[1] ?? "";
    for (const [label, grid] of Object.entries(grids))
      if (grid.split("\n").join(" / ") === expr.trim()) return `Answer: ${label.toLowerCase()}`;
    return "Answer: first";
  });
}

/** imagegame giver: one command per filled cell ("Command: put B in row 1 column 5"), then DONE. */
export function cellByCellGiver(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const first = messages[0].content;
    const grid = first.split("\n").slice(-6, -1);
    const cells: string[] = [];
    grid.forEach((row, r) => {
      row.split(" ").forEach((c, col) => {
        if (c !== "▢") cells.push(`Command: put ${c} in row ${r + 1} column ${col + 1}`);
      });
    });
    const given = messages.filter((m) => m.role === "assistant").length;
    return cells[given] ?? "Command: DONE";
  });
}

/** imagegame follower: applies "put L in row R column C" commands to its grid and returns it. */
export function commandFollower(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const grid = Array.from({ length: 5 }, () => new Array(5).fill("▢"));
    for (const m of messages) {
      if (m.role !== "user") continue;
      const c = /put (\S) in row (\d) column (\d)/i.exec(m.content);
      if (c) grid[Number(c[2]) - 1][Number(c[3]) - 1] = c[1];
    }
    return grid.map((r) => r.join(" ")).join("\n");
  });
}

/**
 * privateshared answerer with perfect bookkeeping: answers the asked slot's value (the instance's request
 * order) and answers each probe with whether that slot has been revealed so far.
 */
export function privateSharedOracle(instance: GameInstance): ScriptedBackend {
  const order = instance.request_order as string[];
  const slots = instance.slots as Record<string, string>;
  const probes = instance.probes as Record<string, Record<string, number>>;
  let answered = 0;
  let probeIdx = 0;
  let probeRound = 0;
  return new ScriptedBackend((_messages: ChatTurn[], context: Context) => {
    if (context.content.startsWith("ME:")) {
      const roundSlots = Object.keys(probes[String(probeRound)]);
      const slot = roundSlots[probeIdx];
      probeIdx++;
      if (probeIdx >= roundSlots.length) {
        probeIdx = 0;
        probeRound++;
      }
      return `ASIDE: ${order.indexOf(slot) < answered ? "yes" : "no"}`;
    }
    const slot = order[answered];
    answered++;
    return `ANSWER: ${slots[slot]}`;
  });
}

/**
 * matchit_ascii player: describes its grid verbatim (rows joined by " / "), asks for the other's grid,
 * answers with its own, and decides by comparing its grid with the other's description.
 */
export function gridComparingMatchItPlayer(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const mine = (/This is your grid:\n([\s\S]*)$/.exec(messages[0]?.content ?? "")?.[1] ?? "")
      .trim()
      .split("\n")
      .join(" / ");
    const ctx = lastUser(messages);
    if (ctx.includes("come to a decision")) {
      const theirs = messages
        .filter((m) => m.role === "user")
        .map((m) => /This is my DESCRIPTION: my grid is (.+)/.exec(m.content)?.[1])
        .find((x) => x !== undefined);
      return `DECISION: ${theirs?.trim() === mine ? "same grid" : "different grids"}`;
    }
    if (ctx.includes('Start your answer with "ANSWER:"')) return `ANSWER: my grid is ${mine}`;
    if (ctx.includes('Start with "QUESTION:"')) return "QUESTION: what exactly is your grid?";
    return `DESCRIPTION: my grid is ${mine}`;
  });
}

/** guesswhat guesser: asks about one candidate per turn ("QUESTION: Is it related to X?"), guesses on a yes. */
export function candidateByCandidateGuesser(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const list = /List of candidate words: \[(.*)\]/.exec(messages[0]?.content ?? "")?.[1] ?? "";
    const candidates = [...list.matchAll(/'([^']*)'|"([^"]*)"/g)].map((m) => m[1] ?? m[2]);
    const asked = messages.filter((m) => m.role === "assistant").map((m) => /related to (.+)\?$/.exec(m.content)?.[1]);
    const last = asked[asked.length - 1];
    if (last && /yes/i.test(lastUser(messages))) return `GUESS: ${last}`;
    const remaining = candidates.filter((c) => !asked.includes(c));
    if (remaining.length === 1) return `GUESS: ${remaining[0]}`;
    return `QUESTION: Is it related to ${remaining[0]}?`;
  });
}

/** guesswhat answerer: "ANSWER: yes" iff the question names the target word. */
export function targetNamingAnswerer(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const target =
      /Target Word: (.+)$/.exec(messages[0]?.content.split("\n\n").slice(0, -1).join("\n\n") ?? "")?.[1] ?? "";
    const question = lastUser(messages).split("\n\n").pop() ?? "";
    return question.toLowerCase().includes(target.toLowerCase()) ? "ANSWER: yes" : "ANSWER: no";
  });
}

const OPPOSITE: Record<string, string> = { north: "south", south: "north", east: "west", west: "east" };

interface RoomObservation {
  room: string;
  dirs: string[];
  moved: boolean;
}

function observeRoom(text: string, first: boolean): RoomObservation | null {
  if (first) {
    const all = [...text.matchAll(/You are in the (.+?)\. Currently available directions: ([^.]+)\./g)];
    const m = all[all.length - 1];
    return m ? { room: m[1], dirs: m[2].split(", "), moved: true } : null;
  }
  const e = /entered (.+?)\. Currently available directions: ([^.]+)\./.exec(text);
  if (e) return { room: e[1], dirs: e[2].split(", "), moved: true };
  const s = /still in the (.+?)\. Currently available directions: ([^.]+)\./.exec(text);
  return s ? { room: s[1], dirs: s[2].split(", "), moved: false } : null;
}

/**
 * textmapworld explorer: depth-first search that learns where each direction leads, backtracks along the way
 * it came, steps straight back out of an already visited room, and says DONE when nothing is left (or, with
 * `target`, on entering the target room). Stateless: it replays the dialogue on every call.
 */
export function depthFirstExplorer(target?: string): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const users = messages.filter((m) => m.role === "user");
    const moves = messages
      .filter((m) => m.role === "assistant")
      .map((m) => /GO:\s*(\w+)/i.exec(m.content)?.[1].toLowerCase() ?? "");
    const start = observeRoom(users[0]?.content ?? "", true);
    if (!start) return "DONE";
    let room = start.room;
    const dirs = new Map([[room, start.dirs]]);
    const dest = new Map<string, Map<string, string>>();
    const visited = new Set([room]);
    const stack: string[] = []; // directions leading back to the parent rooms
    let bounce: string | null = null;
    for (let k = 0; k < moves.length; k++) {
      const d = moves[k];
      const o = observeRoom(users[k + 1]?.content ?? "", false);
      if (!o?.moved) continue;
      dirs.set(o.room, o.dirs);
      const learn = (a: string, dir: string, b: string) => {
        if (!dest.has(a)) dest.set(a, new Map());
        dest.get(a)!.set(dir, b);
      };
      learn(room, d, o.room);
      learn(o.room, OPPOSITE[d], room); // the maps are grids: the way back is the opposite direction
      if (bounce === d) bounce = null;
      else if (stack.length > 0 && stack[stack.length - 1] === d) stack.pop();
      else if (visited.has(o.room)) bounce = OPPOSITE[d];
      else stack.push(OPPOSITE[d]);
      room = o.room;
      visited.add(room);
    }
    if (target !== undefined && room === target) return "DONE";
    if (bounce) return `GO: ${bounce}`;
    const untried = (dirs.get(room) ?? []).find((d) => !dest.get(room)?.has(d));
    if (untried) return `GO: ${untried}`;
    const back = stack[stack.length - 1];
    return back ? `GO: ${back}` : "DONE";
  });
}

/**
 * textmapworld_graphreasoning explorer: `depthFirstExplorer`'s moves wrapped in the required one-line JSON, with
 * the rooms seen so far as the graph.
 */
export function graphReasoningExplorer(): ScriptedBackend {
  const inner = depthFirstExplorer();
  return new ScriptedBackend(async (messages, context) => {
    const move = await inner.respond(messages, context);
    const rooms = new Set<string>();
    for (const m of messages)
      if (m.role === "user")
        for (const r of m.content.matchAll(/(?:entered|You are in the) (.+?)\. Currently available/g)) rooms.add(r[1]);
    return JSON.stringify({ action: move, graph: { nodes: [...rooms], edges: {} } })
      .replace(/,"/g, ', "')
      .replace(/":/g, '": ');
  });
}
