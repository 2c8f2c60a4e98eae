// textmapworld and textmapworld_specificroom: clembench `textmapworld/textmapworld_main/master.py`,
// `textmapworld/textmapworld_specificroom/master.py` and `textmapworld/textmapworld_utils.py` (a717f238).
// Only named graphs without ambiguity occur in the v2.0 instances; other settings are refused.
import { DialogueGameMaster } from "../dialogue-game-master.js";
import { InstanceError } from "../errors.js";
import type { GameDefinition } from "../game.js";
import { type Experiment, field, type GameInstance } from "../instances.js";
import type { Interactions } from "../interactions.js";
import * as M from "../metrics.js";
import { Player, type PlayerBackend, ScriptedBackend } from "../player.js";
import { pyFindAll, pyFloat, pyJsonDumps, pyReplace, pySearch, pyStrip, removePunctuation } from "../py.js";
import { graphSimilarity, makeGraph } from "../graph-edit-distance.js";
import { pyLiteralEval, pyRepr } from "../py-literal.js";
import { GameScorer } from "../scorer.js";

type Directions = [string, string[]][];
type Moves = { node: string; node_moves: [string, string][] }[];

export interface MapInstance {
  nodes: string[];
  edges: [string, string][];
  directions: Directions;
  moves: Moves;
  start: string;
}

/** Parse the Python-literal map fields of an instance. */
export function parseMap(instance: GameInstance): MapInstance {
  const where = `textmapworld/${instance.game_id}`;
  if (field(instance, "Game_Type", where) !== "named_graph" || field(instance, "Ambiguity", where) !== null)
    throw new InstanceError(`${where}: only named graphs without ambiguity are supported`);
  return {
    nodes: pyLiteralEval(field(instance, "Graph_Nodes", where)) as string[],
    edges: pyLiteralEval(field(instance, "Graph_Edges", where)) as [string, string][],
    directions: pyLiteralEval(field(instance, "Directions", where)) as Directions,
    moves: pyLiteralEval(field(instance, "Moves", where)) as Moves,
    start: field<string>(instance, "Current_Position", where),
  };
}

/** `get_directions_main` (case-insensitive for named graphs) or `get_directions` (exact), null when absent. */
function directionsOf(node: string, list: Directions, caseInsensitive: boolean): string[] | null {
  for (const [n, dirs] of list) if (caseInsensitive ? n.toLowerCase() === node.toLowerCase() : n === node) return dirs;
  return null;
}

/** `have_common_element`: a compass word shared by both whitespace-split texts. */
function haveCommonElement(a: string, b: string): boolean {
  const compass = new Set(["east", "west", "north", "south"]);
  const wb = new Set(b.split(/\s+/).filter(Boolean));
  return a
    .split(/\s+/)
    .filter(Boolean)
    .some((w) => wb.has(w) && compass.has(w));
}

/** `loop_identification`: among the last 4 rooms fewer than 3 distinct. */
export function loopIdentification(visited: string[]): boolean {
  return visited.length >= 4 && new Set(visited.slice(-4)).size < 3;
}

/** The programmatic map (`PathDescriber`): moves the explorer and describes the new room. */
class MapDescriber {
  visited: string[];
  current: string | null;
  oldNode: string | null = null;
  directionsNext: string | null = null;
  /** graphreasoning: the graph of the last processable answer */
  graphInfo: unknown = null;
  constructor(
    private readonly map: MapInstance,
    private readonly inst: GameInstance,
    private readonly caseInsensitive: boolean,
    private readonly graphMode = false,
  ) {
    this.current = map.start;
    this.visited = [map.start];
  }

  private validate(utterance: string): "not valid" | true | null {
    const last = this.visited[this.visited.length - 1];
    this.oldNode = last;
    const prev = directionsOf(last, this.map.directions, this.caseInsensitive);
    if (prev === null) throw new TypeError("can only join an iterable"); // the reference raises here
    if (!haveCommonElement(utterance, removePunctuation(prev.join(", ")))) {
      this.directionsNext = prev.join(", ");
      return "not valid";
    }
    let next: string | null = null;
    for (const move of this.map.moves)
      if (move.node === last) for (const [type, to] of move.node_moves) if (type === pyStrip(utterance)) next = to;
    this.current = next;
    if (next !== null && this.map.nodes.includes(next)) {
      this.visited.push(next);
      const dirs = directionsOf(next, this.map.directions, this.caseInsensitive);
      if (dirs === null) throw new TypeError("can only join an iterable");
      this.directionsNext = dirs.join(", ");
      return true;
    }
    return null;
  }

  respond(context: string): string {
    let content = context;
    if (this.graphMode) {
      // graphreasoning: the answer is a Python/JSON literal {"action": ..., "graph": ...}
      try {
        const parsed = pyLiteralEval(context) as Record<string, unknown>;
        if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed) || !("action" in parsed))
          throw new TypeError("not a dict with an action");
        const action = parsed.action;
        if (!("graph" in parsed)) throw new TypeError("no graph");
        this.graphInfo = parsed.graph;
        content = action as string;
        if (typeof content !== "string") throw new TypeError("action is not a string");
      } catch {
        return "Game needs to be aborted";
      }
    }
    const found = pySearch(this.inst.Move_Construction as string, content, true);
    if (!found) throw new TypeError("'NoneType' object has no attribute 'split'"); // as the reference
    // graphreasoning keeps the direction's case (then "North" is not an available "north": not valid)
    const validation = this.validate(this.graphMode ? found[1] : found[1].toLowerCase());
    if (this.directionsNext === null || this.current === null) return "Game needs to be aborted";
    const location = this.current;
    if (validation !== "not valid")
      return pyReplace(
        pyReplace(this.inst.Player2_positive_answer as string, "$DIRECTIONS$", this.directionsNext),
        "$ANOTHER_ROOM$",
        location,
      );
    return pyReplace(
      pyReplace(this.inst.Player2_negative_answer as string, "$DIRECTIONS$", this.directionsNext),
      "$SAME_ROOM$",
      location,
    );
  }
}

export class TextMapWorldMaster extends DialogueGameMaster {
  guesser!: Player;
  describer!: Player;
  readonly maxTurns = 20;
  gameStop = false;
  invalidResponse = false;
  limitReached = false;
  private map!: MapInstance;
  private inst!: GameInstance;
  private mapDescriber!: MapDescriber;
  visitedNodes: string[] = [];
  private reprompting = false;

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
    private readonly specificRoom: boolean,
    private readonly graphMode = false,
  ) {
    super(gameName, experiment);
  }

  protected onSetup(instance: GameInstance): void {
    this.inst = instance;
    this.map = parseMap(instance);
    this.reprompting = Boolean(instance.Loop_Reminder);
    if (this.reprompting || instance.Max_Turns_Reminder)
      throw new InstanceError(`${this.gameName}/${instance.game_id}: loop/max-turn reminders are not supported`);
    // main uses case-insensitive room lookup for named graphs, specificroom exact lookup
    this.mapDescriber = new MapDescriber(this.map, instance, !this.specificRoom && !this.graphMode, this.graphMode);
    this.guesser = new Player(this.backends[0], "PathGuesser");
    this.describer = new Player(new ScriptedBackend((_m, c) => this.mapDescriber.respond(c.content)), "PathDescriber");
    this.addPlayer(this.guesser);
    this.addPlayer(this.describer);
  }

  protected override onBeforeGame(): void {
    let prompt = this.inst.Prompt as string;
    if (prompt.includes("$INITIAL_ROOM$")) prompt = pyReplace(prompt, "$INITIAL_ROOM$", this.map.start);
    const dirs = directionsOf(this.map.start, this.map.directions, !this.specificRoom && !this.graphMode);
    if (dirs === null) throw new InstanceError(`${this.gameName}/${this.inst.game_id}: start room has no directions`);
    prompt = pyReplace(prompt, "$INITIAL_DIRECTIONS$", dirs.join(", "));
    if (this.specificRoom) prompt = pyReplace(prompt, "$GOAL$", this.inst.Specific_Room as string);
    this.setContextFor(this.guesser, prompt);
    this.visitedNodes = [this.map.start];
  }

  protected doesGameProceed(): boolean {
    if (this.invalidResponse) {
      this.logToSelf("aborted", "abort game");
      return false;
    }
    if (this.gameStop) {
      this.logToSelf("stop", "The guesser decided to stop the game");
      return false;
    }
    if (this.currentRound >= this.maxTurns) {
      this.logToSelf("turns_limit", String(this.maxTurns));
      this.limitReached = true;
      return false;
    }
    return true;
  }

  protected override parseResponse(player: Player, utterance: string): string {
    if (player !== this.guesser) return utterance;
    let u = pyStrip(pyReplace(utterance, "\n", ""));
    if (this.graphMode) {
      const found = pySearch(this.inst.Response_Construction as string, u, true);
      if (found) u = found[0];
    }
    // (main/specificroom search move/stop the wrong way round here, so nothing is ever extracted)
    this.logToSelf("parse", u);
    return u;
  }

  /** graphreasoning: the reply must match Response_Construction; its "action" is then checked as DONE or GO. */
  private validateGraphAnswer(utterance: string): boolean {
    const u = pyStrip(pyReplace(utterance, "\n", ""));
    const first = pySearch(this.inst.Response_Construction as string, u, true);
    if (!first) {
      this.invalidResponse = true;
      return false;
    }
    return this.validateMove(first[1]);
  }

  /** A move or the stop word, not both and at most one move; the stop word ends the game. */
  private validateMove(text: string): boolean {
    const stop = pySearch(this.inst.Stop_Construction as string, text, true);
    const move = pySearch(this.inst.Move_Construction as string, text, true);
    if (move && stop) {
      this.invalidResponse = true;
      return false;
    }
    if (stop) {
      this.gameStop = true;
      return true;
    }
    if (pyFindAll(this.inst.Move_Construction as string, text, true).length > 1 || !move) {
      this.invalidResponse = true;
      return false;
    }
    return true;
  }

  protected validatePlayerResponse(player: Player, utterance: string): boolean {
    if (player === this.guesser && this.graphMode) return this.validateGraphAnswer(utterance);
    if (player === this.guesser) return this.validateMove(utterance);
    if (utterance === "Game needs to be aborted") {
      this.invalidResponse = true;
      return false;
    }
    this.logToSelf("Valid format", "Continue");
    return true;
  }

  protected onValidPlayerResponse(player: Player, utterance: string | null): void {
    if (player === this.guesser) this.setContextFor(this.describer, utterance ?? "");
    if (player === this.describer) this.setContextFor(this.guesser, utterance ?? "");
  }

  protected override onAfterRound(): void {
    const from = this.mapDescriber.oldNode;
    const to = this.mapDescriber.current;
    if (from !== to && (this.graphMode || !this.gameStop) && !this.invalidResponse && !this.limitReached) {
      this.logToSelf("move", pyJsonDumps({ old: from, new: to }, 0));
      this.visitedNodes.push(to as string);
      if (this.graphMode) this.logToSelf("graph", pyRepr(this.mapDescriber.graphInfo));
    }
  }
}

/**
 * `GraphGameScorer`: efficiency = share of moves that start a shortest walk through all known unvisited rooms
 * (BFS over paths, `find_best_moves`); exploration = visited / rooms; Main Score = their harmonic mean
 * (specificroom: 100 iff DONE in the target room). An episode without DONE (including the turn limit) is aborted.
 */
export class TextMapWorldScorer extends GameScorer {
  private readonly map: MapInstance;
  private readonly edges: [string, string][];
  constructor(
    gameName: string,
    experiment: Record<string, unknown>,
    gameInstance: GameInstance,
    private readonly specificRoom: boolean,
    private readonly graphMode = false,
  ) {
    super(gameName, experiment, gameInstance);
    this.map = parseMap(gameInstance);
    this.edges = [...this.map.edges.map(([a, b]) => [b, a] as [string, string]), ...this.map.edges];
  }

  private adj(node: string): Set<string> {
    return new Set(this.edges.filter((e) => e[0] === node).map((e) => e[1]));
  }

  /** `find_best_moves`: first steps of the shortest paths from `current` that visit every known unvisited room. */
  findBestMoves(current: string, visited: Set<string>): Set<string> {
    const toVisit = this.edges.filter((e) => visited.has(e[0]) && !visited.has(e[1])).map((e) => e[1]);
    const queue: string[][] = [[current]];
    let head = 0;
    const found = new Set<string>();
    let maxLen = 100;
    while (head < queue.length) {
      const n = queue[head++];
      if (n.length > maxLen) break;
      if (toVisit.every((x) => n.includes(x)) && n.length > 1) {
        found.add(`${n[0]}\u0000${n[1]}`);
        maxLen = n.length;
      }
      const avail = this.edges.filter((e) => e[0] === n[n.length - 1]);
      const allSeen = avail.every((m) => n.includes(m[1]));
      for (const m of avail) if (allSeen || !n.includes(m[1])) queue.push([...n, m[1]]);
    }
    return found;
  }

  override computeScores(interactions: Interactions): void {
    const nodes = this.map.nodes;
    let current = this.map.start;
    const seen = new Set([current, ...this.adj(current)]);
    const visited = new Set([current]);
    const visitedList = [current];
    let valid = 0;
    let invalid = 0;
    let stopped = false;
    let aborted = false;
    let limit = false;
    const good: boolean[] = [];
    const loops = [current];
    let countLoops = 0;
    const similarities: (number | ReturnType<typeof pyFloat>)[] = [];
    const lower = (x: unknown) => (x as string).toLowerCase();
    const original = makeGraph(
      this.map.nodes.map(lower),
      this.edges.map(([a, b]) => [lower(a), lower(b)] as [string, string]),
    );
    for (const turn of interactions.turns)
      for (const event of turn) {
        const a = event.action;
        if (a.type === "aborted" && a.content) aborted = true;
        if (a.type === "move") {
          const c = JSON.parse(String(a.content)) as { old: string; new: string };
          if (c.old !== c.new) valid++;
          else invalid++;
          const best = this.findBestMoves(current, visited);
          visitedList.push(c.new);
          good.push(best.has(`${current}\u0000${c.new}`) && visited.size !== nodes.length);
          current = c.new;
          for (const x of this.adj(current)) seen.add(x);
          loops.push(current);
          visited.add(current);
          if (loopIdentification(loops)) {
            countLoops++;
            if (this.specificRoom) loops.length = 0;
          }
        }
        if (a.type === "graph") {
          try {
            const cont = pyLiteralEval(String(a.content)) as { nodes: unknown[]; edges: Record<string, unknown[]> };
            const edges = Object.values(cont.edges as object).flatMap((sub) => [...(sub as unknown[])]);
            const generated = makeGraph(
              [...cont.nodes].map(lower),
              edges.map((e) => {
                const item = e as string[];
                return [lower(item[0]), lower(item[1])] as [string, string];
              }),
            );
            similarities.push(pyFloat(graphSimilarity(original, generated) * 100));
          } catch {
            similarities.push(0); // the reference's bare except appends the int 0
          }
        }
        if (a.type === "stop" && a.content) stopped = true;
        if (a.type === "turns_limit") limit = true;
      }
    for (const [i, g] of good.entries()) this.logTurnScore(i, "effiencient_move", g);
    if (this.graphMode) for (const [i, v] of similarities.entries()) this.logTurnScore(i, "similarity", v);
    let success = 0;
    if (aborted || !stopped) {
      this.logEpisodeScore(M.METRIC_ABORTED, 1);
      this.logEpisodeScore(M.METRIC_SUCCESS, 0);
      this.logEpisodeScore(M.METRIC_LOSE, 0);
    } else {
      const won = this.specificRoom
        ? (this.gameInstance.Specific_Room as string).toLowerCase() ===
          visitedList[visitedList.length - 1].toLowerCase()
        : visited.size === new Set(nodes).size && [...visited].every((v) => nodes.includes(v));
      if (won) success = 100;
      this.logEpisodeScore(M.METRIC_SUCCESS, won ? 1 : 0);
      this.logEpisodeScore(M.METRIC_ABORTED, 0);
      this.logEpisodeScore(M.METRIC_LOSE, won ? 0 : 1);
    }
    const exploration = nodes.length ? (visited.size / nodes.length) * 100 : 0;
    const efficiency = good.length ? (good.filter(Boolean).length / good.length) * 100 : 0;
    const bench = efficiency + exploration ? (2 * efficiency * exploration) / (efficiency + exploration) : 0;
    const f = (x: number, isFloat: boolean) => (stopped ? (isFloat ? pyFloat(x) : x) : Number.NaN);
    this.logEpisodeScore("moves", f(valid + invalid, false));
    this.logEpisodeScore("valid_moves", f(valid, false));
    this.logEpisodeScore("invalid_moves", f(invalid, false));
    this.logEpisodeScore("stopped", f(1, false));
    this.logEpisodeScore("turns_limit", f(limit ? 1 : 0, false));
    this.logEpisodeScore("loops", f(countLoops, false));
    this.logEpisodeScore("number_visited", f(visited.size, false));
    this.logEpisodeScore("seen", f(seen.size, false));
    this.logEpisodeScore("efficiency", f(efficiency, good.length > 0));
    this.logEpisodeScore("exploration", f(exploration, nodes.length > 0));
    if (this.graphMode) {
      // graphreasoning logs graph_similarity between exploration and Main Score
      const last = similarities[similarities.length - 1];
      if (similarities.length > 0 && stopped) this.logEpisodeScore("graph_similarity", last);
      else this.logEpisodeScore("graph_similarity", stopped ? 0 : Number.NaN);
    }
    if (this.specificRoom) {
      this.logEpisodeScore("old_benchscore", f(bench, efficiency + exploration !== 0));
      this.logEpisodeScore(M.BENCH_SCORE, f(success, false));
    } else this.logEpisodeScore(M.BENCH_SCORE, f(bench, efficiency + exploration !== 0));
  }
}

function textmapGame(name: string, specificRoom: boolean, graphMode = false): GameDefinition {
  return {
    name,
    players: 1,
    roles: ["Explorer"],
    createMaster: (experiment, backends) => new TextMapWorldMaster(name, experiment, backends, specificRoom, graphMode),
    createScorer: (experiment, instance) => new TextMapWorldScorer(name, experiment, instance, specificRoom, graphMode),
  };
}

export const textmapworld = textmapGame("textmapworld", false);
export const textmapworldSpecificRoom = textmapGame("textmapworld_specificroom", true);
/** graphreasoning: each answer is `{"action": "GO: …", "graph": {"nodes": […], "edges": {…}}}`; graphs are scored by edit-distance similarity. */
export const textmapworldGraphReasoning = textmapGame("textmapworld_graphreasoning", false, true);
