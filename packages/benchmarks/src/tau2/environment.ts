import type {
  Action,
  Environment,
  GenerateParams,
  Message,
  Policy,
  ResetResult,
  StepResult,
  ToolCall,
  ToolSchema,
} from "@kiln/rollout";
import { type RetailDb, type RetailDbDelta, loadRetailDb } from "./db.js";
import { Tau2Error } from "./errors.js";
import { type RewardInfo, evaluateEpisode } from "./evaluate.js";
import { FIRST_AGENT_MESSAGE, agentSystemPrompt, loadPolicy } from "./prompts.js";
import type { Tau2Task } from "./tasks.js";
import { type Tau2TaskVersion, retailToolSchemas } from "./tool-specs.js";
import { RetailTools } from "./tools.js";
import type { Tau2Message, TerminationReason } from "./trajectory.js";
import { UserSimulator, isUserStop } from "./user-simulator.js";

// The retail task as a single-agent kiln Environment. The user simulator lives inside it, so
// a step is: the agent's message → tool results, or → the simulated user's reply. Step and
// error accounting follow tau2's half-duplex Orchestrator (src/tau2/orchestrator/orchestrator.py):
// - one step per hop: agent message, user message, or the batch of tool results for a message;
// - the error counter is cumulative over tool results with error=true (never reset);
// - max_steps / max_errors are checked after each hop unless tool results are pending, and
//   they overwrite an earlier stop reason set in the same hop, as upstream does.

export interface Tau2EnvironmentOptions {
  task: Tau2Task;
  /** The policy playing the customer. */
  user: Policy;
  version?: Tau2TaskVersion;
  /** CLI defaults 200 / 10 (tau2 config.py). */
  maxSteps?: number;
  maxErrors?: number;
  /** Sampling parameters for the user simulator (temperature 0 by default); `seed` is set per reset. */
  userParams?: GenerateParams;
  /** NL-assertion judge; without one that component is skipped. */
  judge?: Policy;
  dataDir?: string;
  /** Base DB (default: the shipped db.json). */
  db?: RetailDb;
}

/** Plain-JSON state: enough to resume grading or to seed a start. */
export interface Tau2EnvState {
  taskId: string;
  version: Tau2TaskVersion;
  dbDelta: RetailDbDelta;
  messages: Tau2Message[];
  stepCount: number;
  numErrors: number;
  done: boolean;
  terminationReason: TerminationReason | null;
}

/** Tool calls of an action with parsed arguments; null when a call's arguments are not a JSON object. */
function callsOf(action: Action): { id: string; name: string; arguments: Record<string, unknown> }[] | null {
  if (action.toolCalls.length > 0)
    return action.toolCalls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments }));
  const raw = action.message.tool_calls ?? [];
  const out: { id: string; name: string; arguments: Record<string, unknown> }[] = [];
  for (const c of raw) {
    try {
      const args = JSON.parse(c.function.arguments || "{}") as unknown;
      if (args === null || typeof args !== "object" || Array.isArray(args)) return null;
      out.push({ id: c.id, name: c.function.name, arguments: args as Record<string, unknown> });
    } catch {
      return null;
    }
  }
  return out;
}

export class Tau2RetailEnvironment implements Environment<Tau2EnvState> {
  readonly id: string;
  readonly version: string;
  readonly systemPrompt: string;
  private readonly taskVersion: Tau2TaskVersion;
  private readonly maxSteps: number;
  private readonly maxErrors: number;
  private readonly baseDb: RetailDb;
  private toolkit!: RetailTools;
  private userSim!: UserSimulator;
  private messages: Tau2Message[] = [];
  private stepCount = 0;
  private numErrors = 0;
  private done = false;
  private termination: TerminationReason | null = null;
  private rewardInfo: RewardInfo | null = null;
  private errorText: string | null = null;

  constructor(private readonly options: Tau2EnvironmentOptions) {
    this.taskVersion = options.version ?? "v1.0";
    this.id = `tau2-retail/${options.task.id}`;
    this.version = `tau2-retail-${this.taskVersion}`;
    this.maxSteps = options.maxSteps ?? 200;
    this.maxErrors = options.maxErrors ?? 10;
    this.baseDb = options.db ?? loadRetailDb(options.dataDir);
    this.systemPrompt = agentSystemPrompt(loadPolicy(options.dataDir));
  }

  tools(): ToolSchema[] {
    return retailToolSchemas(this.taskVersion);
  }

  /** The full trajectory so far (agent view plus tool error flags). */
  trajectory(): readonly Tau2Message[] {
    return this.messages;
  }

  get terminationReason(): TerminationReason | null {
    return this.termination;
  }

  get reward(): RewardInfo | null {
    return this.rewardInfo;
  }

  /** The error that ended the episode (agent or user policy failure), if any. */
  get error(): string | null {
    return this.errorText;
  }

  /** End the episode because the agent's policy threw: an infrastructure error (reward 0, not graded). */
  async abort(error: string): Promise<void> {
    if (this.done) return;
    this.errorText = error;
    this.finish("infrastructure_error");
    await this.grade();
  }

  get db(): RetailDb {
    return this.toolkit.db;
  }

  /**
   * Fresh DB, the fixed opening `Hi! How can I help you today?` and the simulated user's first
   * message. `state` restores a saved episode instead (its user simulator starts afresh).
   */
  async reset(options: { seed: number; state?: Tau2EnvState }): Promise<ResetResult> {
    const db = this.baseDb.fresh();
    this.toolkit = new RetailTools(db, this.taskVersion);
    this.userSim = new UserSimulator(this.options.user, this.options.task, {
      params: { temperature: 0, ...this.options.userParams, seed: options.seed },
      dataDir: this.options.dataDir,
    });
    this.rewardInfo = null;
    this.errorText = null;
    if (options.state) {
      const s = options.state;
      if (s.taskId !== this.options.task.id)
        throw new Tau2Error(
          `tau2 state: task "${s.taskId}" given to the environment of task "${this.options.task.id}"`,
        );
      db.applyDelta(s.dbDelta);
      this.messages = structuredClone(s.messages);
      this.stepCount = s.stepCount;
      this.numErrors = s.numErrors;
      this.done = s.done;
      this.termination = s.terminationReason;
      return { messages: [{ role: "system", content: this.systemPrompt }, ...this.messages] };
    }
    this.messages = [{ role: "assistant", content: FIRST_AGENT_MESSAGE }];
    this.stepCount = 0;
    this.numErrors = 0;
    this.done = false;
    this.termination = null;
    const userMsg = await this.userHop(FIRST_AGENT_MESSAGE);
    if (this.done) await this.grade();
    return {
      messages: [
        { role: "system", content: this.systemPrompt },
        ...this.messages.slice(0, 1),
        ...(userMsg ? [userMsg] : []),
      ],
      info: { taskId: this.options.task.id, done: this.done, terminationReason: this.termination },
    };
  }

  async step(action: Action): Promise<StepResult> {
    if (this.done) throw new Tau2Error(`tau2 episode ${this.id}: step() after the episode ended (${this.termination})`);
    const msg: Tau2Message = { role: "assistant", content: action.message.content ?? null };
    const calls = callsOf(action);
    if (action.message.tool_calls && action.message.tool_calls.length > 0) msg.tool_calls = action.message.tool_calls;
    else if (calls && calls.length > 0) {
      msg.tool_calls = calls.map<ToolCall>((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: JSON.stringify(c.arguments) },
      }));
    }
    this.messages.push(msg);
    const hasText = typeof msg.content === "string" && msg.content.trim() !== "";
    const observations: Message[] = [];
    if (calls === null || (!hasText && (calls?.length ?? 0) === 0)) {
      // An empty message or undecodable tool arguments: upstream's message validation fails.
      this.stepCount++;
      this.finish("agent_error");
    } else if (calls.length > 0) {
      this.stepCount++; // agent hop; limits are not checked while tool results are pending
      for (const c of calls) {
        const out = this.toolkit.invoke(c.name, c.arguments);
        if (out.error) this.numErrors++;
        const tm: Tau2Message = { role: "tool", tool_call_id: c.id, content: out.content, error: out.error };
        this.messages.push(tm);
        observations.push({ role: "tool", tool_call_id: c.id, content: out.content });
      }
      this.stepCount++; // env hop, back to the agent
      this.checkLimits();
    } else {
      this.stepCount++; // agent hop, to the user
      this.checkLimits();
      if (!this.done) {
        const u = await this.userHop(msg.content as string);
        if (u) observations.push(u);
      }
    }
    if (this.done) await this.grade();
    return {
      observations,
      reward: this.done ? (this.rewardInfo?.reward ?? 0) : 0,
      done: this.done,
      info: this.done ? { terminationReason: this.termination, rewardInfo: this.rewardInfo } : undefined,
    };
  }

  getState(): Tau2EnvState {
    return {
      taskId: this.options.task.id,
      version: this.taskVersion,
      dbDelta: this.toolkit.db.delta(),
      messages: structuredClone(this.messages),
      stepCount: this.stepCount,
      numErrors: this.numErrors,
      done: this.done,
      terminationReason: this.termination,
    };
  }

  private async userHop(agentText: string): Promise<Message | null> {
    let text: string;
    try {
      text = await this.userSim.reply(agentText);
    } catch (e) {
      this.errorText = `user simulator: ${e instanceof Error ? e.message : String(e)}`;
      this.finish("infrastructure_error");
      return null;
    }
    const m: Message = { role: "user", content: text };
    this.messages.push(m);
    this.stepCount++;
    if (text.trim() === "") this.finish("user_error");
    else if (isUserStop(text)) this.finish("user_stop");
    this.checkLimits();
    return m;
  }

  private finish(reason: TerminationReason): void {
    this.done = true;
    this.termination = reason;
  }

  /** tau2 Orchestrator._check_termination (called when no tool results are pending). */
  private checkLimits(): void {
    if (this.stepCount >= this.maxSteps) this.finish("max_steps");
    if (this.numErrors >= this.maxErrors) this.finish("too_many_errors");
  }

  private async grade(): Promise<void> {
    try {
      this.rewardInfo = await evaluateEpisode(this.options.task, this.messages, this.termination ?? "agent_error", {
        version: this.taskVersion,
        judge: this.options.judge,
        db: this.baseDb,
      });
    } catch (e) {
      // The judge failed (server error, unparseable verdict): the episode cannot be scored.
      this.errorText = `judge: ${e instanceof Error ? e.message : String(e)}`;
      this.termination = "infrastructure_error";
      this.rewardInfo = {
        reward: 0,
        basis: [],
        terminationReason: "infrastructure_error",
        skippedComponents: [],
        note: `not graded: ${this.errorText}`,
      };
    }
  }
}
