// privateshared: clembench `privateshared/master.py` and `constants.py` (clembench a717f238).
import { readDataJson } from "../data-dir.js";
import { DialogueGameMaster } from "../dialogue-game-master.js";
import { ScoringError } from "../errors.js";
import type { GameContext, GameDefinition } from "../game.js";
import { type Experiment, field, type GameInstance } from "../instances.js";
import type { Interactions } from "../interactions.js";
import * as M from "../metrics.js";
import { Player, type PlayerBackend, ScriptedBackend } from "../player.js";
import { pyFloat, pyReplace, pyStrip } from "../py.js";
import { GameScorer } from "../scorer.js";

/** `resources/en_words.json` (keys are read case-insensitively in the reference). */
export interface PrivateSharedWords {
  ANSWER: string;
  ASIDE: string;
  ME: string;
  PROBE: string;
  DUMMY_PROMPT: string;
  YES: string;
  NO: string;
  OK: string;
}

const INVALID = "NA";
const INVALID_LABEL = 2;

export interface Probe {
  target: string;
  question: string;
  gt: number;
  answer?: string;
  value?: number;
  tries?: number;
}

/** `_has_continuation`: after stripping outer newlines, any newline left means extra text. */
export function hasContinuation(response: string): boolean {
  return pyStrip(response, "\n").includes("\n");
}

/** `_parse_probing_response`: `ASIDE:` first, one line, then the text must start with yes/no (lowercased). */
export function parseProbingResponse(response: string, words: PrivateSharedWords): string {
  const tag = pyStrip(words.ASIDE);
  if (!response.startsWith(tag) || hasContinuation(response)) return INVALID;
  const clean = pyStrip(pyReplace(response, tag, "")).toLowerCase();
  if (clean.startsWith(words.YES)) return words.YES;
  if (clean.startsWith(words.NO)) return words.NO;
  return INVALID;
}

export class PrivateSharedMaster extends DialogueGameMaster {
  answerer!: Player;
  questioner!: Player;
  aborted = false;
  filledSlots: boolean[] = [];
  playedProbingRounds = 0;
  allProbes: Probe[][] = [];
  probeGt: Record<string, number> = {};
  private words!: PrivateSharedWords;
  private retries: string[] = [];
  private probingQuestions!: Record<string, string[]>;
  private requestStrings!: Record<string, string[]>;
  private probing!: Record<string, Record<string, number>>;
  private questionOrder: string[] = [];
  private slots: Record<string, string> = {};
  private questionerTag = "";
  private initialPrompt = "";
  private questionType: string | null = null;
  private requestIdx: Record<string, number> = {};
  requestCounts: number[] = [];
  parsedRequestCounts: number[] = [];
  violatedRequestCounts: number[] = [];

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
    private readonly ctx: GameContext,
  ) {
    super(gameName, experiment);
  }

  protected onSetup(instance: GameInstance): void {
    const where = `${this.gameName}/${this.experiment.name}/${instance.game_id}`;
    const exp = this.experiment.name;
    this.probingQuestions = readDataJson(
      this.ctx.dataDir,
      "privateshared",
      "resources",
      "texts",
      exp,
      "probing_questions.json",
    );
    this.retries = readDataJson<{ suffixes: string[] }>(
      this.ctx.dataDir,
      "privateshared",
      "resources",
      "texts",
      "reprompts.json",
    ).suffixes;
    this.requestStrings = readDataJson(this.ctx.dataDir, "privateshared", "resources", "texts", exp, "requests.json");
    const lang = field<string>(instance, "lang", where);
    const rawWords = readDataJson<Record<string, unknown>>(
      this.ctx.dataDir,
      "privateshared",
      "resources",
      `${lang}_words.json`,
    );
    const upper: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(rawWords)) upper[k.toUpperCase()] = v;
    this.words = upper as unknown as PrivateSharedWords;
    this.questionerTag = `${field<string>(instance, "tag", where)}: `;
    this.probing = field(instance, "probes", where);
    this.questionOrder = field<string[]>(instance, "request_order", where);
    this.slots = field(instance, "slots", where);
    this.requestIdx = field(instance, "requests", where);
    this.initialPrompt = field<string>(instance, "initial_prompt", where);
    this.probeGt = {};
    this.questionOrder.forEach((slot, i) => {
      this.probeGt[slot] = i;
    });
    const nProbeTurns = this.questionOrder.length + 1; // one probing before the game and one after each request
    this.requestCounts = new Array(nProbeTurns).fill(0);
    this.parsedRequestCounts = new Array(nProbeTurns).fill(0);
    this.violatedRequestCounts = new Array(nProbeTurns).fill(0);

    this.answerer = new Player(this.backends[0], "Answerer");
    // the Questioner is programmatic: it asks the instance's request for the current slot
    this.questioner = new Player(
      new ScriptedBackend(() => {
        if (this.questionType === null) throw new Error("privateshared: question type not set");
        return this.requestStrings[this.questionType][this.requestIdx[this.questionType]];
      }),
      "Questioner",
    );
    this.addPlayer(this.answerer);
    this.addPlayer(this.questioner, { initialContext: this.words.DUMMY_PROMPT });
    this.currentPlayerIdx = 1; // the questioner starts
  }

  /** The answerer's pseudo first turn (prompt + "Ok.") and the preliminary probing round 0. */
  protected override async onBeforeGame(): Promise<void> {
    this.setContextFor(this.questioner, this.words.DUMMY_PROMPT);
    this.answerer.messages.push({ role: "user", content: this.initialPrompt, label: "pseudo" });
    this.answerer.messages.push({ role: "assistant", content: this.words.OK, label: "pseudo" });
    this.recorder.logEvent("GM", this.answerer.name, {
      type: "send message",
      content: this.initialPrompt,
      label: "pseudo",
    });
    this.recorder.logEvent(this.answerer.name, "GM", { type: "get message", content: this.words.OK, label: "pseudo" });
    const [probes, ok] = await this.probe();
    this.allProbes.push(probes);
    if (!ok) {
      this.logToSelf("invalid format", "Abort: invalid format in probing.");
      this.aborted = true;
    }
    this.currentRound = 1; // the preliminary probing round is round 0
  }

  protected override onBeforeRound(): void {
    this.questionType = this.questionOrder[this.currentRound - 1];
    this.setContextFor(this.questioner, this.words.DUMMY_PROMPT);
  }

  protected override startNextRound(): boolean {
    return this.currentPlayerIdx === 1;
  }

  protected doesGameProceed(): boolean {
    if (this.aborted) return false;
    return this.currentRound <= this.questionOrder.length;
  }

  private isValidAnswer(response: string): boolean {
    return response.startsWith(pyStrip(this.words.ANSWER)) && !hasContinuation(response);
  }

  private parseAnswer(response: string): string {
    return pyStrip(pyReplace(response, pyStrip(this.words.ANSWER), ""));
  }

  protected validatePlayerResponse(player: Player, response: string): boolean {
    if (player === this.questioner) return true;
    if (!this.isValidAnswer(response)) {
      this.violatedRequestCounts[this.currentRound] += 1;
      return false;
    }
    this.parsedRequestCounts[this.currentRound] += 1;
    return true;
  }

  protected override parseResponse(player: Player, response: string): string | null {
    if (player === this.questioner) return response;
    return this.parseAnswer(response);
  }

  private recordAnswer(answer: string): void {
    const slot = this.questionOrder[this.currentRound - 1];
    const filled = answer.toLowerCase().includes(this.slots[slot].toLowerCase());
    this.filledSlots.push(filled);
    this.logToSelf("metadata", `Slot filled: ${filled ? "True" : "False"}`);
    // an answer that gives away a later slot moves that slot's gold reveal round earlier
    const turn = this.currentRound - 1;
    for (const [s, value] of Object.entries(this.slots)) {
      if (answer.toLowerCase().includes(value.toLowerCase()) && turn < this.probeGt[s]) {
        this.logToSelf(
          "metadata",
          `Value for ${s.toUpperCase()} anticipated; ground truth turn updated from ${this.probeGt[s]} to ${turn}.`,
        );
        this.probeGt[s] = turn;
      }
    }
  }

  protected async onValidPlayerResponse(player: Player, parsed: string | null): Promise<void> {
    if (player === this.questioner) {
      this.setContextFor(this.answerer, `${this.questionerTag}${parsed}`);
      return;
    }
    this.recordAnswer(parsed ?? "");
    const [probes, ok] = await this.probe();
    this.allProbes.push(probes);
    if (!ok) {
      this.logToSelf("invalid format", "Abort: invalid format in probing.");
      this.aborted = true;
    }
    this.requestCounts[this.currentRound] += 1; // requests to the answerer per round (valid answers only)
  }

  protected override onAfterGame(): void {
    this.logKey("probes", this.allProbes);
    this.logKey("realised_slots", this.probeGt);
    this.logToSelf("end", "Game finished.");
    this.logKey(M.METRIC_REQUEST_COUNT, this.requestCounts);
    this.logKey(M.METRIC_REQUEST_COUNT_PARSED, this.parsedRequestCounts);
    this.logKey(M.METRIC_REQUEST_COUNT_VIOLATED, this.violatedRequestCounts);
    this.logKey("Filled Slots", this.filledSlots);
    this.logKey("Aborted", this.aborted);
    this.logKey("Played Probe Rounds", this.playedProbingRounds);
  }

  private createTurnProbes(): Probe[] {
    const round = this.probing[String(this.currentRound)] ?? {};
    return Object.entries(round).map(([slot, idx]) => ({
      target: slot.toUpperCase(),
      question: this.words.PROBE.replace("{}", this.probingQuestions[slot][idx]),
      gt: this.currentRound > this.probeGt[slot] ? 1 : 0,
    }));
  }

  /** One probing round: every slot's probe once, outside the dialogue history, up to 5 tries each. */
  private async probe(): Promise<[Probe[], boolean]> {
    const probes = this.createTurnProbes();
    const success: boolean[] = [];
    for (const probe of probes) {
      const { answer, parsed, ok, tries } = await this.probingLoop(probe);
      probe.answer = answer;
      probe.value = parsed === this.words.YES ? 1 : parsed === this.words.NO ? 0 : INVALID_LABEL;
      probe.tries = tries;
      this.logToSelf(
        "metadata",
        ok
          ? `Answer for ${probe.target} valid after ${tries} tries.`
          : `Answer for ${probe.target} invalid after max attempts.`,
      );
      this.logToSelf("check", `Answer is ${probe.value === probe.gt ? "" : "in"}correct.`);
      success.push(ok);
      if (!ok) break;
    }
    const ok = success.every((x) => x);
    if (ok) this.playedProbingRounds += 1;
    return [probes, ok];
  }

  private async probingLoop(probe: Probe): Promise<{ answer: string; parsed: string; ok: boolean; tries: number }> {
    let tries = 1;
    let ok = false;
    let answer = "";
    let parsed = INVALID;
    while (tries <= this.retries.length) {
      // quirk kept: "ME: " becomes "ME: " + suffix + " ", i.e. two spaces on the first try
      const question = pyReplace(probe.question, this.words.ME, `${this.words.ME}${this.retries[tries - 1]} `);
      answer = await this.callPlayer(this.answerer, { role: "user", content: question }, false);
      this.requestCounts[this.currentRound] += 1;
      parsed = parseProbingResponse(answer, this.words);
      this.logToSelf("parse", parsed);
      if (parsed === this.words.YES || parsed === this.words.NO) {
        ok = true;
        this.parsedRequestCounts[this.currentRound] += 1;
        break;
      }
      this.violatedRequestCounts[this.currentRound] += 1;
      tries += 1;
    }
    return { answer, parsed, ok, tries };
  }
}

/** sklearn `accuracy_score`. */
export function accuracy(gold: number[], pred: number[]): number {
  let n = 0;
  for (let i = 0; i < gold.length; i++) if (gold[i] === pred[i]) n++;
  return n / gold.length;
}

/** sklearn `cohen_kappa_score` (unweighted); NaN when only one label occurs (0/0 in sklearn). */
export function cohenKappa(y1: number[], y2: number[]): number {
  const labels = [...new Set([...y1, ...y2])].sort((a, b) => a - b);
  const k = labels.length;
  const idx = new Map(labels.map((l, i) => [l, i]));
  const cm = Array.from({ length: k }, () => new Array(k).fill(0));
  for (let i = 0; i < y1.length; i++) cm[idx.get(y1[i])!][idx.get(y2[i])!]++;
  const sum0 = labels.map((_, j) => cm.reduce((a, row) => a + row[j], 0));
  const sum1 = cm.map((row) => row.reduce((a, x) => a + x, 0));
  const total = sum0.reduce((a, x) => a + x, 0);
  let num = 0;
  let den = 0;
  for (let i = 0; i < k; i++)
    for (let j = 0; j < k; j++) {
      const w = i === j ? 0 : 1;
      num += w * cm[i][j];
      den += w * ((sum0[i] * sum1[j]) / total);
    }
  return 1 - num / den;
}

/** Python's `max(0, x)`: 0 unless x > 0 (so NaN gives 0). */
function pyMax0(x: number): number {
  return x > 0 ? x : 0;
}

/** Main Score: 100 × harmonic mean of slot-filling accuracy and truncated kappa (0 if both are 0). */
export function privateSharedBenchScore(sf: number, kappa: number): number {
  if (Number.isNaN(sf) || Number.isNaN(kappa)) return Number.NaN;
  if (sf + kappa === 0) return 0;
  return 100 * ((2 * sf * kappa) / (sf + kappa));
}

export class PrivateSharedScorer extends GameScorer {
  override computeScores(interactions: Interactions): void {
    const slots = this.gameInstance.slots as Record<string, string>;
    const aborted = Boolean(interactions.Aborted);
    const gold: number[] = [];
    const pred: number[] = [];
    const played = Number(interactions["Played Probe Rounds"]);
    const probes = interactions.probes as Probe[][];
    const reqs = interactions[M.METRIC_REQUEST_COUNT] as number[];
    const pReqs = interactions[M.METRIC_REQUEST_COUNT_PARSED] as number[];
    const vReqs = interactions[M.METRIC_REQUEST_COUNT_VIOLATED] as number[];
    const filled = interactions["Filled Slots"] as boolean[];
    const middle = Math.trunc((Object.keys(slots).length + 1) / 2) - 1;
    for (let turn = 0; turn < played; turn++) {
      this.logTurnScore(turn, M.METRIC_REQUEST_COUNT, reqs[turn]);
      this.logTurnScore(turn, M.METRIC_REQUEST_COUNT_PARSED, pReqs[turn]);
      this.logTurnScore(turn, M.METRIC_REQUEST_COUNT_VIOLATED, vReqs[turn]);
      const tg = probes[turn].map((p) => p.gt);
      const tp = probes[turn].map((p) => p.value as number);
      this.logTurnScore(turn, "Accuracy", pyFloat(accuracy(tg, tp)));
      if (turn !== 0) this.logTurnScore(turn, "Slot Filled?", filled[turn - 1] ? 1 : 0);
      gold.push(...tg);
      pred.push(...tp);
      if (turn === middle) this.logEpisodeScore("Middle-Accuracy", aborted ? Number.NaN : pyFloat(accuracy(tg, tp)));
    }
    const acc = aborted ? Number.NaN : accuracy(gold, pred);
    const kappa = aborted ? Number.NaN : cohenKappa(gold, pred);
    const truncKappa = aborted ? Number.NaN : pyMax0(kappa);
    if (!aborted && filled.length === 0)
      throw new ScoringError("privateshared: no valid answer was given (division by zero in the reference)");
    const sf = aborted ? Number.NaN : filled.filter((x) => x).length / filled.length;
    const bench = privateSharedBenchScore(sf, truncKappa);
    this.logEpisodeScore("Accuracy", pyFloat(acc));
    this.logEpisodeScore("Kappa", pyFloat(kappa));
    // Python's max(0, kappa) returns the int 0 unless kappa > 0
    this.logEpisodeScore("Truncated Kappa", aborted ? Number.NaN : kappa > 0 ? pyFloat(kappa) : 0);
    this.logEpisodeScore("Slot-Filling-Accuracy", pyFloat(sf));
    const benchIsIntZero = !aborted && sf + truncKappa === 0;
    this.logEpisodeScore(M.BENCH_SCORE, benchIsIntZero ? 0 : pyFloat(bench));
    const successRatio = aborted ? 0 : acc === 1 && sf === 1 ? 1 : 0;
    const loseRatio = aborted ? 0 : successRatio ? 0 : 1;
    const sum = (xs: number[]) => xs.reduce((a, x) => a + x, 0);
    this.logEpisodeScore(M.METRIC_ABORTED, aborted ? 1 : 0);
    this.logEpisodeScore(M.METRIC_LOSE, loseRatio);
    this.logEpisodeScore(M.METRIC_SUCCESS, successRatio);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT, sum(reqs));
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_PARSED, sum(pReqs));
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_VIOLATED, sum(vReqs));
    this.logEpisodeScore(M.METRIC_REQUEST_SUCCESS_RATIO, pyFloat(sum(pReqs) / sum(reqs)));
  }
}

export const privateshared: GameDefinition = {
  name: "privateshared",
  players: 1,
  roles: ["Answerer"],
  createMaster: (experiment, backends, ctx) => new PrivateSharedMaster("privateshared", experiment, backends, ctx),
  createScorer: (experiment, instance) => new PrivateSharedScorer("privateshared", experiment, instance),
};
