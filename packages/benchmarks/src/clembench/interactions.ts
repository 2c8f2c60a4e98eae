// The episode record, laid out as clemcore's GameInteractionsRecorder writes interactions.json:
// {meta, player_models, players, turns: [[event, ...] per round], <game-specific keys>}.

export interface GameEvent {
  from: string;
  to: string;
  timestamp: string;
  action: { type: string; content: unknown; label?: string };
}

export interface InteractionsMeta {
  game_name: string;
  experiment_name: string;
  game_id: number | string;
  results_folder: string;
  clem_version: string;
  round_count: number | null;
  completed: boolean | null;
}

export interface Interactions {
  meta: InteractionsMeta;
  player_models: Record<string, string>;
  players: Record<string, { game_role: string; model_name: string }>;
  turns: GameEvent[][];
  [key: string]: unknown;
}

/** Version string recorded in `meta.clem_version`: this port follows the clemcore 3.x turn loop. */
export const CLEM_VERSION = "kiln-clembench/clemcore-3.3";

/** Records events per round, exactly as clemcore's recorder (`log_next_round`, `log_event`, `log_key`). */
export class InteractionsRecorder {
  readonly interactions: Interactions;
  private currentRound = 0;
  /** Injected so tests get deterministic timestamps. */
  now: () => Date = () => new Date();

  constructor(gameName: string, experimentName: string, gameId: number | string, resultsFolder = "") {
    this.interactions = {
      meta: {
        game_name: gameName,
        experiment_name: experimentName,
        game_id: gameId,
        results_folder: resultsFolder,
        clem_version: CLEM_VERSION,
        round_count: null,
        completed: null,
      },
      player_models: {},
      players: { GM: { game_role: "Game Master", model_name: "programmatic" } },
      turns: [[]],
    };
  }

  logPlayer(name: string, gameRole: string, modelName: string): void {
    this.interactions.players[name] = { game_role: gameRole, model_name: modelName };
    this.interactions.player_models[name] = modelName;
  }

  logNextRound(): void {
    this.currentRound += 1;
    this.interactions.meta.round_count = this.currentRound + 1;
    this.interactions.turns.push([]);
  }

  logEvent(from: string, to: string, action: GameEvent["action"]): void {
    // Python's datetime.isoformat() has no "Z" and microseconds; keep ISO-8601 without the zone suffix
    const timestamp = this.now().toISOString().replace("Z", "");
    this.interactions.turns[this.currentRound].push({ from, to, timestamp, action: structuredCloneKeepFloats(action) });
  }

  logKey(key: string, value: unknown): void {
    this.interactions[key] = structuredCloneKeepFloats(value);
  }

  logGameEnd(): void {
    this.interactions.meta.round_count = this.currentRound + 1;
    this.interactions.meta.completed = true;
  }
}

function structuredCloneKeepFloats<T>(v: T): T {
  // PyFloat instances must survive (structuredClone drops their prototype); values here are plain data
  if (Array.isArray(v)) return v.map((x) => structuredCloneKeepFloats(x)) as T;
  if (v && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = structuredCloneKeepFloats(x);
    return out as T;
  }
  return v;
}
