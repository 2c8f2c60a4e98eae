// wordle/utils/guessvalidator.py and wordle/utils/compute_metrics.py.

/**
 * Colour feedback for a guess, e.g. `a<yellow> p<green> p<red> l<red> e<red>`. Greens are marked first;
 * yellows then consume the remaining target letters left to right, so duplicates are not over-counted.
 */
export function wordleFeedback(guess: string, target: string): string {
  const g = [...guess];
  const t = [...target];
  if (guess === target) return g.map((l) => `${l}<green>`).join(" ");
  const result: ("green" | "yellow" | "red")[] = t.map(() => "red");
  const pool: (string | null)[] = [...t];
  for (let i = 0; i < t.length; i++) {
    if (g[i] === pool[i]) {
      result[i] = "green";
      pool[i] = null;
    }
  }
  for (let i = 0; i < t.length; i++) {
    if (result[i] === "green") continue;
    const j = pool.indexOf(g[i]);
    if (j >= 0) {
      result[i] = "yellow";
      pool[j] = null;
    }
  }
  return t.map((_, i) => `${g[i]}<${result[i]}>`).join(" ");
}

/** Closeness per turn: 5 per green, 3 per yellow (`turns_closeness`). */
export function turnsCloseness(feedbacks: string[]): number[] {
  return feedbacks.map((fb) => {
    let score = 0;
    for (const letter of fb.split(" ")) {
      if (letter.includes("green")) score += 5;
      else if (letter.includes("yellow")) score += 3;
    }
    return score;
  });
}

function byColour(feedback: string): { colours: Map<string, string[]>; letters: string[] } {
  const colours = new Map<string, string[]>();
  const letters: string[] = [];
  for (const code of feedback.split(" ")) {
    // re.findall(r"\b(\w+)\b\s*\<(.+?)\>", letter_code)
    for (const m of code.matchAll(/\b([\p{L}\p{N}_]+)\b\s*<(.+?)>/gu)) {
      const letter = m[1].trim();
      letters.push(letter);
      const colour = m[2].trim();
      if (!colours.has(colour)) colours.set(colour, []);
      colours.get(colour)!.push(letter);
    }
  }
  return { colours, letters };
}

/** Strategy per turn: −20 per reused red letter, +20 per kept green, +10 per kept yellow (`turns_strategy`). */
export function turnsStrategy(feedbacks: string[], isAborted: boolean): number[] {
  if (feedbacks.length === 1) return isAborted ? [0] : [100];
  const scores = [0];
  for (let i = 0; i + 1 < feedbacks.length; i++) {
    const first = byColour(feedbacks[i]).colours;
    const next = new Set(byColour(feedbacks[i + 1]).letters);
    const overlap = (xs: string[] | undefined) => new Set((xs ?? []).filter((x) => next.has(x))).size;
    let score = 0;
    score -= overlap(first.get("red")) * 20;
    score += overlap(first.get("green")) * 20;
    score += overlap(first.get("yellow")) * 10;
    scores.push(score);
  }
  return scores;
}
