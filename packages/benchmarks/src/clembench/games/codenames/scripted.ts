// Rule-following scripted codenames players (the same policy as test/clembench/fixtures/codenames/make_fixtures.py).
// The cluegiver spells its targets reversed, joined by "0", behind an "x" (e.g. "xtius0yad" for suit, day), so the
// guesser can decode them from the clue alone; the clue is then never a board word nor shares a WordNet lemma.
import { type ChatTurn, type Context, ScriptedBackend } from "../../player.js";

export type CluegiverMode = "team" | "opponent" | "assassin";

export interface CodenamesScriptOptions {
  /** Replies to send instead of the policy's, by the player's 0-based turn (to trigger rule violations). */
  overrides?: Record<number, string>;
  modelName?: string;
}

function lastUser(messages: ChatTurn[], context: Context): string {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === "user") return messages[i].content;
  return context.content;
}

const reverse = (w: string) => [...w].reverse().join("");

/** A scripted player: `opts.overrides` by turn, else `policy` on the last user prompt. */
function scriptedPlayer(opts: CodenamesScriptOptions, policy: (prompt: string) => string): ScriptedBackend {
  let turn = 0;
  return new ScriptedBackend((messages, context) => {
    const override = opts.overrides?.[turn++];
    if (override !== undefined) return override;
    return policy(lastUser(messages, context));
  }, opts.modelName ?? "programmatic");
}

function wordList(prompt: string, pattern: RegExp): string[] {
  const m = pattern.exec(prompt);
  return m ? m[1].split(", ").filter((w) => w.length > 0) : [];
}

/**
 * A cluegiver that targets up to two team words ("team": it can win), one kill word ("assassin": loses at
 * once), or lets the opponent win ("opponent": one distractor word per turn while there is one, then an
 * opponent word). Its prompt is written before the mock opponent moves (reference order), so a listed opponent
 * word may already be revealed; distractors never are, hence their priority.
 */
export function codenamesCluegiver(mode: CluegiverMode = "team", opts: CodenamesScriptOptions = {}): ScriptedBackend {
  return scriptedPlayer(opts, (prompt) => {
    const lists = {
      team: wordList(prompt, /team words are: (.*)\./),
      opponent: wordList(prompt, /(?:opponent's team words are|Remaining words for your opponent are): (.*)\./),
      assassin: wordList(prompt, /[Kk]ill words are: (.*)\./),
      innocent: wordList(prompt, /[Dd]istractor words are: (.*)\./),
    };
    let targets: string[];
    if (mode === "opponent") {
      const pool = [lists.innocent, lists.opponent, lists.team].find((l) => l.length > 0) ?? [];
      targets = pool.slice(0, 1);
    } else if (mode === "assassin" && lists.assassin.length > 0) targets = lists.assassin.slice(0, 1);
    else targets = lists.team.slice(0, 2);
    return `CLUE: x${targets.map(reverse).join("0")}\nTARGETS: ${targets.join(", ")}`;
  });
}

/** A guesser that decodes the scripted cluegiver's clue and guesses exactly its targets. */
export function codenamesGuesser(opts: CodenamesScriptOptions = {}): ScriptedBackend {
  return scriptedPlayer(opts, (prompt) => {
    const clues = [...prompt.matchAll(/associated with the word '([^']*)'/g)];
    const clue = clues.length > 0 ? clues[clues.length - 1][1] : "x";
    return `GUESS: ${clue.slice(1).split("0").map(reverse).join(", ")}`;
  });
}
