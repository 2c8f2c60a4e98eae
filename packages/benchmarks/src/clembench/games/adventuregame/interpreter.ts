// The adventuregame interactive-fiction interpreter: clembench a717f238 `adventuregame/if_wrapper.py`
// (`AdventureIFInterpreter`). It parses the player's command, resolves it against PDDL action definitions
// over a fact-set world state, answers with the same feedback texts, failure phases and failure types, and
// tracks goals and exploration. Reference quirks are kept on purpose and marked "(reference)".
import { InstanceError, ResourceError } from "../../errors.js";
import type { GameInstance } from "../../instances.js";
import { pyRepr } from "../../py-literal.js";
import { type ActionDict, CommandGrammar } from "./command-grammar.js";
import { type Fact, FactSet, type FactValue, factFromString, factToString } from "./fact-set.js";
import {
  type ActionDefinition,
  type DomainDefinition,
  type Formula,
  type FunctionTerm,
  type NumComp,
  type Pred,
  parseActionPddl,
  parseDomainPddl,
  type When,
  type Forall,
} from "./pddl.js";

/** The definition files an instance names, already read (see `loadAdventureDefinitions`). */
export interface AdventureDefinitions {
  entities: Record<string, unknown>[];
  rooms: Record<string, unknown>[];
  actions: Record<string, unknown>[];
  /** the `pddl_domain` text of each domain file */
  domains: string[];
  grammarCore: { grammar_head: string; grammar_foot: string };
}

/** The reference crashes here (a Python exception ends the episode); the port raises this instead. */
export class AdventureInterpreterError extends InstanceError {}

type VarValue = string | null;
type VariableMap = Map<string, VarValue>;
/** A fail record as the reference logs it (`phase`, `fail_type`, `arg`, later `exploration_info`). */
export type FailInfo = Record<string, unknown> & { phase: string; fail_type: string };
/** Goals as `process_action` returns them: strings after a successful action, the interpreter's set of
 * fact tuples after a failed one (reference). */
export type GoalsAchieved = (string | Fact)[];

export interface ActionResult {
  goals: GoalsAchieved;
  feedback: string;
  info: Record<string, unknown>;
}

interface TraceNode {
  fulfilled: boolean;
  [k: string]: unknown;
}

interface EffectResults {
  added: Fact[];
  removed: Fact[];
}

const DIGITS = /[0-9]$/;

function endsWithDigit(s: string): boolean {
  return DIGITS.test(s);
}

/** Python `str.capitalize()`: first character upper-cased, the rest lower-cased. */
export function pyCapitalize(s: string): string {
  return s.length === 0 ? s : s[0].toUpperCase() + s.slice(1).toLowerCase();
}

/** The jinja2 templates here only use `{{ name }}`: undefined renders empty, Python None as "None". */
export function renderTemplate(template: string, args: Record<string, unknown>): string {
  return template.replace(/\{\{\s*([A-Za-z_][A-Za-z_0-9]*)\s*\}\}/g, (_m, name: string) => {
    const v = args[name];
    if (v === undefined) return "";
    if (v === null) return "None";
    return String(v);
  });
}

/** Strip trailing digits (the reference's `while x.endswith(digits): x = x[:-1]`). */
function stripDigits(s: string): string {
  return s.replace(/[0-9]+$/, "");
}

function isObj(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** Python's `'variable' in x` for a predicate argument: a key test on dicts, a substring test on strings. */
function variableOf(x: unknown): string | null {
  if (isObj(x) && "variable" in x) return x.variable as string;
  return null;
}

export class AdventureInterpreter {
  readonly reprStrToType = new Map<string, string>();
  readonly entityTypes = new Map<string, Record<string, unknown>>();
  readonly roomTypes = new Map<string, Record<string, unknown>>();
  readonly actionTypes = new Map<string, Record<string, unknown> & { interaction: ActionDefinition }>();
  domain!: DomainDefinition & { supertypes: Record<string, string[]> };
  readonly grammar: CommandGrammar;

  worldState = new FactSet();
  worldStateHistory: FactSet[] = [];
  readonly goalState = new FactSet();
  /** tuples; replaced after every successful action (reference) */
  goalsAchieved = new FactSet();
  instToType = new Map<string, string>();
  roomToType = new Map<string, string>();

  explorationHistory: FactSet[] = [];
  explorationState = new FactSet();

  private preconIdx = -1;
  private preconTrace: TraceNode[] = [];

  constructor(
    readonly instance: GameInstance,
    defs: AdventureDefinitions,
  ) {
    this.initializeEntityTypes(defs.entities);
    this.initializeRoomTypes(defs.rooms);
    this.initializeActionTypes(defs.actions);
    this.initializeDomain(defs.domains);
    this.initializeStatesFromStrings();
    this.grammar = this.initializeActionParsing(defs.grammarCore);
    this.trackExploration();
  }

  private where(): string {
    return `adventuregame/${this.instance.game_id}`;
  }

  private initializeEntityTypes(defs: Record<string, unknown>[]): void {
    this.initializeTypes(defs, this.entityTypes);
  }

  private initializeRoomTypes(defs: Record<string, unknown>[]): void {
    this.initializeTypes(defs, this.roomTypes);
  }

  /** Entity and room type definitions: attributes by type_name, and repr_str → type_name. */
  private initializeTypes(defs: Record<string, unknown>[], into: Map<string, Record<string, unknown>>): void {
    for (const d of defs) {
      const name = d.type_name as string;
      const attrs: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(d)) {
        if (k === "type_name") this.reprStrToType.set(d.repr_str as string, name);
        else attrs[k] = v;
      }
      into.set(name, attrs);
    }
  }

  private initializeActionTypes(defs: Record<string, unknown>[]): void {
    for (const d of defs) {
      const name = d.type_name as string;
      if (typeof d.pddl !== "string") throw new ResourceError(`adventuregame action ${name}: no pddl definition`);
      const attrs: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(d)) if (k !== "type_name") attrs[k] = v;
      this.actionTypes.set(name, {
        ...attrs,
        interaction: parseActionPddl(d.pddl, `adventuregame action ${name}`),
      });
    }
  }

  private initializeDomain(domains: string[]): void {
    if (domains.length === 0) throw new InstanceError(`${this.where()}: no domain definition`);
    // the reference keeps only the last domain definition
    const domain = parseDomainPddl(domains[domains.length - 1], "adventuregame domain");
    for (const entityType of domain.types.entity) {
      const def = this.entityTypes.get(entityType);
      if (!def) throw new AdventureInterpreterError(`${this.where()}: domain entity type ${entityType} is not defined`);
      for (const trait of (def.traits as string[] | undefined) ?? []) {
        if (!(trait in domain.types)) domain.types[trait] = [entityType];
        else domain.types[trait].push(entityType);
      }
    }
    const supertypes: Record<string, string[]> = {};
    for (const [supertype, subtypes] of Object.entries(domain.types))
      for (const sub of subtypes) (supertypes[sub] ??= []).push(supertype);
    this.domain = { ...domain, supertypes };
  }

  private initializeActionParsing(core: { grammar_head: string; grammar_foot: string }): CommandGrammar {
    const larks = [...this.actionTypes.values()].map((a) => a.lark as string);
    const adjs = new Set<string>();
    for (const def of this.entityTypes.values())
      for (const a of (def.possible_adjs as string[] | undefined) ?? []) adjs.add(a);
    return new CommandGrammar(core.grammar_head, larks, [...adjs], core.grammar_foot);
  }

  private initializeStatesFromStrings(): void {
    const initial = this.instance.initial_state;
    const goals = this.instance.goal_state;
    if (!Array.isArray(initial) || !Array.isArray(goals))
      throw new InstanceError(`${this.where()}: initial_state and goal_state must be lists of fact strings`);
    for (const s of initial) this.worldState.add(factFromString(s as string));
    const toAdd = new FactSet();
    for (const f of this.worldState)
      if (f[0] === "type") {
        const def = this.entityTypes.get(f[2] as string);
        if (!def) throw new AdventureInterpreterError(`${this.where()}: entity type ${f[2]} is not defined`);
        for (const trait of (def.traits as string[] | undefined) ?? []) toAdd.add([trait, f[1]]);
      }
    for (const f of this.worldState)
      if (f[0] === "room") {
        toAdd.add(["type", `${f[1]}floor1`, "floor"]);
        toAdd.add(["at", `${f[1]}floor1`, f[1]]);
      }
    this.worldState = this.worldState.union(toAdd);
    for (const f of this.worldState) if (f[0] === "type") this.instToType.set(f[1] as string, f[2] as string);
    for (const f of this.worldState) if (f[0] === "room") this.roomToType.set(f[1] as string, f[2] as string);
    // supported items that are neither 'in' nor 'on' go on the floor; the reference names the floor
    // "<room>floor" without the 1 (reference)
    for (const f of this.worldState)
      if (f[0] === "at" && this.worldState.has(["needs_support", f[1]])) {
        let supported = false;
        for (const g of this.worldState)
          if ((g[0] === "on" || g[0] === "in") && g[1] === f[1]) {
            supported = true;
            break;
          }
        if (!supported) toAdd.add(["on", f[1], `${f[2]}floor`]);
      }
    for (const f of this.worldState) {
      if (f[0] === "in" && this.worldState.has(["container", f[2]])) {
        let open = false;
        for (const g of this.worldState)
          if (g[0] === "open" && g[1] === f[2]) {
            open = true;
            break;
          }
        if (open) toAdd.add(["accessible", f[1]]);
      }
      if (f[0] === "in" && f[2] === "inventory") toAdd.add(["accessible", f[1]]);
      if (f[0] === "on" && this.worldState.has(["support", f[2]])) toAdd.add(["accessible", f[1]]);
      if (f[0] === "type" && !this.worldState.has(["needs_support", f[1]]) && f[2] !== "floor" && f[2] !== "player")
        toAdd.add(["accessible", f[1]]);
    }
    this.worldState = this.worldState.union(toAdd);
    for (const fn of this.domain.functions ?? []) {
      const found = [...this.worldState].filter((f) => f[0] === fn.function_def_predicate);
      for (const f of found) {
        this.worldState.delete(f);
        const v = String(f[2]);
        this.worldState.add([f[0], f[1], v.includes(".") ? Number.parseFloat(v) : Number.parseInt(v, 10)]);
      }
      for (const f of [...this.worldState])
        if (f[0] === "type" && f[2] === fn.function_def_type) {
          const exists = [...this.worldState].some((g) => g[0] === fn.function_def_predicate && g[1] === f[1]);
          if (!exists) this.worldState.add([fn.function_def_predicate, f[1], 0]);
        }
      if (fn.function_def_type === "inventory") {
        const exists = [...this.worldState].some((g) => g[0] === fn.function_def_predicate && g[1] === "inventory");
        if (!exists) this.worldState.add([fn.function_def_predicate, "inventory", 0]);
      }
    }
    this.worldStateHistory.push(this.worldState.clone());
    for (const s of goals) this.goalState.add(factFromString(s as string));
  }

  // ------------------------------------------------------------------ descriptions

  /** `_get_inst_str`: adjectives plus the type's surface string ("red apple", "living room"). */
  instStr(inst: string): string {
    const adjs: string[] = [];
    for (const f of this.worldState) if (f[0] === "adj" && f[1] === inst) adjs.push(String(f[2]));
    let type: string;
    if (this.instToType.has(inst)) type = this.instToType.get(inst) as string;
    else if (this.roomToType.has(inst)) type = this.roomToType.get(inst) as string;
    else type = stripDigits(inst);
    let repr: string;
    if (this.entityTypes.has(type)) repr = this.entityTypes.get(type)?.repr_str as string;
    else if (this.roomTypes.has(type)) repr = this.roomTypes.get(type)?.repr_str as string;
    else repr = type;
    adjs.push(repr);
    return adjs.join(" ");
  }

  playerRoom(): string {
    for (const f of this.worldState) if (f[0] === "at" && f[1] === "player1") return f[2] as string;
    throw new AdventureInterpreterError(`${this.where()}: the player is nowhere`);
  }

  private roomContents(): string[] {
    const room = this.playerRoom();
    const out: string[] = [];
    for (const f of this.worldState) if (f[0] === "at" && f[2] === room && f[1] !== "player1") out.push(f[1] as string);
    return out;
  }

  /** `get_player_room_contents_visible`: not hidden by type, not inside a closed container or the inventory. */
  visibleContents(): string[] {
    const visible: string[] = [];
    for (const thing of this.roomContents()) {
      const type = this.instToType.get(thing);
      const def = type === undefined ? undefined : this.entityTypes.get(type);
      if (!def) throw new AdventureInterpreterError(`${this.where()}: ${thing} has no entity type`);
      if ("hidden" in def) continue;
      let containedIn: string | null = null;
      for (const f of this.worldState)
        if (f[0] === "in" && f[1] === thing) {
          containedIn = f[2] as string;
          for (const g of this.worldState) {
            if (g[0] === "closed" && g[1] === containedIn) break;
            if (g[0] === "open" && g[1] === containedIn) {
              visible.push(thing);
              break;
            }
            if (g[1] === "inventory" && g[1] === containedIn) break;
          }
        }
      if (containedIn) continue;
      visible.push(thing);
    }
    return visible;
  }

  private roomExits(): string[] {
    const room = this.playerRoom();
    const out: string[] = [];
    for (const f of this.worldState) if (f[0] === "exit" && f[1] === room) out.push(f[2] as string);
    return out;
  }

  /** `get_full_room_desc`: the room, its visible things and their states, and the passages. */
  fullRoomDesc(): string {
    const room = this.playerRoom();
    const roomRepr = this.roomTypes.get(this.roomToType.get(room) as string)?.repr_str as string;
    const playerAt = `You are in a ${roomRepr} now.`;
    const internal = this.visibleContents();
    const visible = internal.map((i) => this.instStr(i));
    let contents = "";
    if (visible.length >= 3)
      contents = ` There are a ${visible.slice(0, -1).join(", a ")} and a ${visible[visible.length - 1]}.`;
    else if (visible.length === 2) contents = ` There are a ${visible[0]} and a ${visible[1]}.`;
    else if (visible.length === 1) contents = ` There is a ${visible[0]}.`;
    const states: string[] = [];
    for (const thing of internal)
      for (const f of this.worldState) {
        if (f[0] === "closed" && f[1] === thing) states.push(`The ${this.instStr(thing)} is closed.`);
        else if (f[0] === "open" && f[1] === thing) states.push(`The ${this.instStr(thing)} is open.`);
        if (f[0] === "in" && f[1] === thing)
          states.push(`The ${this.instStr(thing)} is in the ${this.instStr(f[2] as string)}.`);
        if (f[0] === "on" && f[1] === thing)
          states.push(`The ${this.instStr(thing)} is on the ${this.instStr(f[2] as string)}.`);
      }
    const stateStr = states.length ? ` ${states.join(" ")}` : "";
    const exits = this.roomExits();
    let exitsStr = "";
    if (exits.length === 1) exitsStr = ` There is a passage to a ${this.instStr(exits[0])} here.`;
    else if (exits.length === 2)
      exitsStr = ` There are passages to a ${this.instStr(exits[0])} and a ${this.instStr(exits[1])} here.`;
    else if (exits.length >= 3)
      exitsStr = ` There are passages to a ${exits
        .slice(0, -1)
        .map((e) => this.instStr(e))
        .join(", a ")} and a ${this.instStr(exits[exits.length - 1])} here.`;
    return `${playerAt}${contents}${stateStr}${exitsStr}`;
  }

  inventoryContent(): string[] {
    const out: string[] = [];
    for (const f of this.worldState) if (f[0] === "in" && f[2] === "inventory") out.push(f[1] as string);
    return out;
  }

  inventoryDesc(): string {
    const inv = this.inventoryContent();
    if (inv.length === 0) return "Your inventory is empty.";
    let s: string;
    if (inv.length === 1) s = `a ${this.instStr(inv[0])}`;
    else {
      const items = inv.map((i) => `a ${this.instStr(i)}`);
      s = `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
    }
    return `In your inventory you have ${s}.`;
  }

  private containerContentDesc(container: string): string {
    const repr = this.instStr(container);
    const content: string[] = [];
    for (const f of this.worldState) if (f[0] === "in" && f[2] === container) content.push(f[1] as string);
    if (content.length === 0) return `The ${repr} is empty.`;
    if (content.length === 1) return `In the ${repr} there is a ${this.instStr(content[0])}.`;
    const items = content.map((i) => `a ${this.instStr(i)}`);
    return `In the ${repr} there are ${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}.`;
  }

  /** `get_entity_desc` (EXAMINE): the entity's openable/takeable/support/container states. */
  entityDesc(entity: string): string {
    if (entity === "inventory") return this.inventoryDesc();
    let entityId = "";
    for (const f of this.worldState)
      if (f[0] === "type" && f[2] === entity) {
        entityId = f[1] as string;
        break;
      }
    const out: string[] = [];
    // function-scoped like the Python locals they mirror (a value can carry over from an earlier fact)
    let openableState: string | undefined;
    let supportState: string | undefined;
    let supporter: string | undefined;
    let containerDesc: string | undefined;
    let supportDesc: string | undefined;
    const listed = (xs: string[]) => `${xs.slice(0, -1).join(", ")} and ${xs[xs.length - 1]}`;
    for (const f of this.worldState) {
      if (f[1] !== entityId) continue;
      if (f[0] === "openable") {
        const name = stripDigits(f[1] as string);
        for (const g of this.worldState)
          if (g[1] === entityId && (g[0] === "open" || g[0] === "closed")) {
            openableState = g[0] as string;
            break;
          }
        if (openableState === undefined)
          throw new AdventureInterpreterError(`${this.where()}: ${entityId} is neither open nor closed`);
        out.push(`The ${name} is openable and currently ${openableState}.`);
      }
      if (f[0] === "takeable") out.push(`The ${stripDigits(f[1] as string)} is takeable.`);
      if (f[0] === "needs_support") {
        const name = stripDigits(f[1] as string);
        for (const g of this.worldState)
          if (g[1] === entityId && (g[0] === "on" || g[0] === "in")) {
            supportState = g[0] as string;
            supporter = g[2] as string;
            break;
          }
        if (supporter === undefined) throw new AdventureInterpreterError(`${this.where()}: ${entityId} has no support`);
        supporter = supporter === "inventory" ? "your inventory" : `the ${stripDigits(supporter)}`;
        out.push(`The ${name} is ${supportState} ${supporter}.`);
      }
      if (f[0] === "container") {
        const name = stripDigits(f[1] as string);
        const contained: string[] = [];
        for (const g of this.worldState)
          if (g.length === 3 && g[2] === entityId && g[0] === "in") {
            if (!this.worldState.has(["accessible", g[1]])) continue;
            contained.push(`a ${stripDigits(g[1] as string)}`);
          }
        if (this.worldState.has(["closed", f[1]]))
          containerDesc = `You can't see the ${name}'s contents because it is closed.`;
        else if (contained.length === 0) containerDesc = `The ${name} is empty.`;
        else if (contained.length === 1) containerDesc = `There is ${contained[0]} in the ${name}.`;
        else containerDesc = `There are ${listed(contained)} in the ${name}.`;
        out.push(containerDesc);
      }
      if (f[0] === "support") {
        const name = stripDigits(f[1] as string);
        const supported: string[] = [];
        for (const g of this.worldState)
          if (g.length === 3 && g[2] === entityId && g[0] === "on") supported.push(`a ${stripDigits(g[1] as string)}`);
        if (supported.length === 0) supportDesc = `There is nothing on the ${name}.`;
        else if (supported.length === 1) supportDesc = `There is ${supported[0]} on the ${name}.`;
        else supportDesc = `There are ${listed(supported)} on the ${name}.`;
        out.push(supportDesc);
      }
    }
    return out.join(" ");
  }

  // ------------------------------------------------------------------ exploration

  private currentPerceived(): FactSet {
    const out = new FactSet();
    for (const f of this.worldState) if (f[0] === "at" && f[1] === "player1") out.add(f);
    const visible = new Set(this.visibleContents());
    for (const f of this.worldState)
      if (visible.has(f[1] as string) && ["open", "closed", "at", "in", "on"].includes(f[0] as string)) out.add(f);
    const inv = new Set(this.inventoryContent());
    for (const f of this.worldState) {
      if (inv.has(f[1] as string) && (f[0] === "at" || f[0] === "in")) out.add(f);
      if (f[1] === "inventory" && f[0] === "itemcount") out.add(f);
    }
    const room = this.playerRoom();
    for (const f of this.worldState) if (f[0] === "exit" && f[1] === room) out.add(f);
    return out;
  }

  /** `track_exploration`: add what is perceived now, drop facts the action removed, record a snapshot. */
  trackExploration(effects?: EffectResults): void {
    if (this.explorationHistory.length >= 1) {
      const perceived = this.currentPerceived();
      const prior = this.explorationHistory[this.explorationHistory.length - 1];
      this.explorationState = this.explorationState.union(perceived.difference(prior));
      if (effects) for (const f of effects.removed) this.explorationState.delete(f);
      this.explorationHistory.push(this.explorationState.clone());
    }
    if (this.explorationState.size === 0) {
      this.explorationState = this.currentPerceived();
      this.explorationHistory.push(this.explorationState);
    }
  }

  /**
   * `get_exploration_info`: epistemic/pragmatic flags, gain, and known/visited ratios (Python floats; logged
   * as plain numbers because the event recorder clones contents, the scorer writes them as floats).
   */
  explorationInfo(actionType?: string): Record<string, unknown> {
    const info: Record<string, unknown> = {};
    const def = actionType ? this.actionTypes.get(actionType) : undefined;
    info.action_epistemic = def ? def.epistemic : false;
    info.action_pragmatic = def ? def.pragmatic : false;
    const prev = this.explorationHistory[this.explorationHistory.length - 2];
    const gainAdded = this.explorationState.difference(prev);
    if (info.action_epistemic) {
      info.effective_epistemic_gain_facts = [...gainAdded];
      info.effective_epistemic_gain_amount = gainAdded.size;
    } else info.effective_epistemic_gain_amount = 0;
    const allEntities = new Set<FactValue>();
    for (const f of this.worldState) if (f[0] === "type") allEntities.add(f[1]);
    const known = [...this.explorationState].filter((f) => f[0] === "at");
    info.known_entities = known;
    info.known_entities_ratio = known.length / allEntities.size;
    const allRooms = new Set<FactValue>();
    for (const f of this.worldState) if (f[0] === "room") allRooms.add(f[1]);
    const visited: FactValue[] = [];
    for (const state of this.explorationHistory)
      for (const f of state) if (f[0] === "at" && f[1] === "player1" && !visited.includes(f[2])) visited.push(f[2]);
    info.visited_rooms = visited;
    info.visited_rooms_ratio = visited.length / allRooms.size;
    const goalEntities = new Set<FactValue>();
    for (const g of this.goalState) {
      if (g.length < 3)
        throw new AdventureInterpreterError(`${this.where()}: goal ${factToString(g)} has one argument`);
      goalEntities.add(g[1]);
      goalEntities.add(g[2]);
    }
    const knownGoal = new FactSet();
    for (const g of this.goalState) for (const k of known) if (g.includes(k[1])) knownGoal.add(k);
    info.known_goal_entities = [...knownGoal];
    info.known_goal_entities_ratio = knownGoal.size / goalEntities.size;
    return info;
  }

  // ------------------------------------------------------------------ parsing phase

  /**
   * `parse_action_input`: clean (drop a final "." or "!", lower-case), parse, and check that the verb and
   * arguments are defined. Returns the action dict, or the failure feedback and fail record.
   */
  parseActionInput(input: string): { ok: true; action: ActionDict } | { ok: false; feedback: string; fail: FailInfo } {
    let cmd = input;
    if (cmd.endsWith(".") || cmd.endsWith("!")) cmd = cmd.slice(0, -1);
    cmd = cmd.toLowerCase();
    const action = this.grammar.parse(cmd);
    if (!action)
      return {
        ok: false,
        feedback: "I don't know what you mean.",
        fail: { phase: "parsing", fail_type: "lark_exception", arg: this.grammar.errorText(cmd) },
      };
    if (action.type === "unknown" && this.actionTypes.has(action.arg1 as string))
      return {
        ok: false,
        feedback: "I don't know what you mean.",
        fail: { phase: "parsing", fail_type: "malformed_command", arg: pyRepr(action) },
      };
    if (!this.actionTypes.has(action.type)) {
      if ("arg1" in action)
        return {
          ok: false,
          feedback: `I don't know how to interpret this '${action.arg1}' action.`,
          fail: { phase: "parsing", fail_type: "undefined_action_verb", arg: action.arg1 },
        };
      return {
        ok: false,
        feedback: "I don't know what you mean.",
        fail: { phase: "parsing", fail_type: "undefined_action", arg: cmd },
      };
    }
    if (action.type === "done") return { ok: true, action };
    const arg1 = action.arg1 as string;
    if (!this.reprStrToType.has(arg1))
      return {
        ok: false,
        feedback: `I don't know what '${arg1}' means.`,
        fail: { phase: "parsing", fail_type: "undefined_repr_str", arg: arg1 },
      };
    action.arg1 = this.reprStrToType.get(arg1) as string;
    const type1 = action.arg1;
    if (!this.entityTypes.has(type1)) {
      if (this.roomTypes.has(type1)) {
        const t = action.type;
        if (t === "take" || t === "put" || t === "open" || t === "close") {
          const feedback =
            t === "take"
              ? `You can't take the '${type1}'.`
              : t === "put"
                ? `You can't put the '${type1}' anywhere.`
                : t === "open"
                  ? `You don't need to open the '${type1}'.`
                  : `You can't close the '${type1}'.`;
          return { ok: false, feedback, fail: { phase: "parsing", fail_type: "manipulating_room", arg: type1 } };
        }
      } else
        return {
          ok: false,
          feedback: `I don't know what a '${type1}' is.`,
          fail: { phase: "parsing", fail_type: "undefined_argument_type", arg: type1 },
        };
    }
    if ("arg2" in action) {
      if (action.type === "take" && action.arg2 === "inventory") {
        for (const item of this.inventoryContent())
          if (this.instToType.get(item) === type1)
            return {
              ok: false,
              feedback: `The ${this.entityTypes.get(type1)?.repr_str} is already in your inventory.`,
              fail: { phase: "resolution", fail_type: "taking_from_inventory", arg: type1 },
            };
        return {
          ok: false,
          feedback: "You don't need to take things from your inventory.",
          fail: { phase: "parsing", fail_type: "taking_from_inventory", arg: action.arg2 },
        };
      }
      const arg2 = action.arg2 as string;
      if (this.reprStrToType.has(arg2)) {
        action.arg2 = this.reprStrToType.get(arg2) as string;
        if (this.roomTypes.has(action.arg2)) {
          const here = this.roomTypes.get(this.roomToType.get(this.playerRoom()) as string)?.repr_str;
          // compares the room type name with the current room's surface string (reference)
          if (action.arg2 !== here)
            return {
              ok: false,
              feedback: `You are not in a ${action.arg2}.`,
              fail: { phase: "parsing", fail_type: "other_room_argument", arg: action.arg2 },
            };
        }
      } else
        return {
          ok: false,
          feedback: `I don't know what '${arg2}' means.`,
          fail: { phase: "parsing", fail_type: "undefined_repr_str", arg: arg2 },
        };
    }
    return { ok: true, action };
  }

  // ------------------------------------------------------------------ resolution phase

  private checkFact(f: (FactValue | null)[]): boolean {
    if (f.includes(null)) return true;
    return this.worldState.has(f as Fact);
  }

  /**
   * `predicate_to_tuple`: fill variables; an argument that is a type word (not ending in a digit or
   * "inventory") becomes the first instance of that type, and every variable holding that word is rebound
   * to the instance (reference; the variable map is shared with later checks and the effects).
   */
  private predicateToTuple(pred: Pred, vars: VariableMap): (FactValue | null)[] {
    const resolve = (a: unknown): FactValue | null => {
      const v = variableOf(a);
      if (v !== null) {
        if (!vars.has(v)) throw new AdventureInterpreterError(`${this.where()}: unbound PDDL variable ?${v}`);
        return vars.get(v) as VarValue;
      }
      return a as string;
    };
    const tuple: (FactValue | null)[] = [pred.predicate, resolve(pred.arg1)];
    if (pred.arg2) tuple.push(resolve(pred.arg2));
    if (pred.arg3) tuple.push(resolve(pred.arg3));
    const args = tuple.slice(1);
    for (const [idx, arg] of args.entries()) {
      if (!arg || typeof arg !== "string") continue;
      if (endsWithDigit(arg) || arg.endsWith("inventory")) continue;
      const matched: string[] = [];
      for (const f of this.worldState)
        if ((f[0] === "room" || f[0] === "type") && f[2] === arg) matched.push(f[1] as string);
      if (matched.length === 0)
        throw new AdventureInterpreterError(
          `${this.where()}: no instance of type "${arg}" in the world (the reference raises IndexError)`,
        );
      for (const [k, v] of vars) if (v === arg) vars.set(k, matched[0]);
      tuple[idx + 1] = matched[0];
    }
    return tuple;
  }

  private functionValue(term: FunctionTerm, vars: VariableMap): { value: number | undefined; list: FactValue[] } {
    if ("function_number" in term) {
      const n = term.function_number;
      return { value: n.includes(".") ? Number.parseFloat(n) : Number.parseInt(n, 10), list: [] };
    }
    const obj = vars.get(term.function_variable.variable) as string;
    const list: FactValue[] = [term.function_id, obj];
    let value: number | undefined;
    for (const f of this.worldState)
      if (f[0] === list[0] && f[1] === list[1]) {
        list.push(f[2]);
        value = f[2] as number;
      }
    return { value, list };
  }

  /** `check_conditions` in both modes: with `trace` it returns trace dicts and counts precondition indices. */
  private checkConditions(cond: Formula, vars: VariableMap, countIdx: boolean, trace: true): TraceNode;
  private checkConditions(cond: Formula, vars: VariableMap, countIdx: boolean, trace: false): boolean;
  private checkConditions(cond: Formula, vars: VariableMap, countIdx: boolean, trace: boolean): TraceNode | boolean {
    if ("not" in cond) {
      if (trace) {
        const inner = this.checkConditions(cond.not, vars, countIdx, true);
        const node: TraceNode = { not: inner, fulfilled: inner.fulfilled === false };
        this.preconTrace.push(node);
        return node;
      }
      return this.checkConditions(cond.not, vars, countIdx, false) === false;
    }
    if ("predicate" in cond) {
      const tuple = this.predicateToTuple(cond, vars);
      const isFact = this.checkFact(tuple);
      if (countIdx) this.preconIdx += 1;
      if (trace) return { predicate_tuple: tuple, fulfilled: isFact, precon_idx: this.preconIdx };
      return isFact;
    }
    if ("num_comp" in cond) {
      const c = cond as NumComp;
      const a = this.functionValue(c.arg1, vars);
      const b = this.functionValue(c.arg2, vars);
      if (a.value === undefined || b.value === undefined)
        throw new AdventureInterpreterError(
          `${this.where()}: no function fact for ${pyRepr(a.list)} (the reference raises)`,
        );
      const holds = {
        equal: a.value === b.value,
        less: a.value < b.value,
        leq: a.value <= b.value,
        greater: a.value > b.value,
        greq: a.value >= b.value,
      }[c.num_comp];
      const tuple = holds ? [] : a.list.length ? a.list : b.list;
      if (countIdx) this.preconIdx += 1;
      if (trace) return { predicate_tuple: tuple, fulfilled: holds, precon_idx: this.preconIdx };
      return holds;
    }
    if ("and" in cond) {
      if (trace) {
        const items = cond.and.map((x) => this.checkConditions(x, vars, countIdx, true));
        const node: TraceNode = { and: items, fulfilled: items.every((x) => x.fulfilled) };
        this.preconTrace.push(node);
        return node;
      }
      // every item is checked (no short-circuit): the checks can rebind variables (reference)
      const results = cond.and.map((x) => this.checkConditions(x, vars, countIdx, false));
      return results.every(Boolean);
    }
    if ("or" in cond) {
      if (trace) {
        const items = cond.or.map((x) => this.checkConditions(x, vars, countIdx, true));
        const node: TraceNode = { or: items, fulfilled: items.some((x) => x.fulfilled) };
        this.preconTrace.push(node);
        return node;
      }
      const results = cond.or.map((x) => this.checkConditions(x, vars, countIdx, false));
      return results.some(Boolean);
    }
    // forall conditions are not handled by the reference: they count as false
    if (trace) throw new AdventureInterpreterError(`${this.where()}: unsupported precondition ${pyRepr(cond)}`);
    return false;
  }

  private resolveEffect(effect: Formula, vars: VariableMap): EffectResults {
    const res: EffectResults = { added: [], removed: [] };
    let polarity = true;
    let e = effect;
    if ("not" in e) {
      polarity = false;
      e = e.not;
    }
    if ("predicate" in e) {
      const list: (FactValue | null)[] = [e.predicate, e.arg1 as string];
      if (e.arg2) {
        list.push(e.arg2 as string);
        if (e.arg3) list.push(e.arg3 as string);
      }
      const raw = [e.predicate, e.arg1, e.arg2, e.arg3];
      for (let i = 1; i < list.length; i++) {
        const v = variableOf(raw[i]);
        if (v !== null) {
          if (!vars.has(v)) throw new AdventureInterpreterError(`${this.where()}: unbound PDDL variable ?${v}`);
          list[i] = vars.get(v) as VarValue;
        }
      }
      if (list.includes(null)) return res;
      const fact = list as Fact;
      if (polarity) {
        this.worldState.add(fact);
        res.added.push(fact);
      } else {
        this.worldState.delete(fact);
        res.removed.push(fact);
      }
    } else if ("function_change" in e) {
      const a = this.functionValue(e.arg1, vars);
      const b = this.functionValue(e.arg2, vars);
      if (a.list.length < 3 || b.value === undefined)
        throw new AdventureInterpreterError(
          `${this.where()}: no function fact for ${pyRepr(a.list)} (the reference raises)`,
        );
      const old = [...a.list];
      this.worldState.delete(old);
      res.removed.push(old);
      const next = [...a.list];
      const cur = next[2] as number;
      next[2] =
        e.function_change === "increase" ? cur + b.value : e.function_change === "decrease" ? cur - b.value : b.value;
      this.worldState.add(next);
      res.added.push(next);
    }
    return res;
  }

  private resolveWhen(when: When, vars: VariableMap): EffectResults {
    const res: EffectResults = { added: [], removed: [] };
    const [cond, effect] = when.when;
    if (this.checkConditions(cond, vars, false, false)) {
      const effects = "and" in effect ? effect.and : [effect];
      for (const e of effects) {
        const r = this.resolveEffect(e, vars);
        res.added.push(...r.added);
        res.removed.push(...r.removed);
      }
    }
    return res;
  }

  private resolveForall(forall: Forall, vars: VariableMap): EffectResults {
    const res: EffectResults = { added: [], removed: [] };
    const iterated = new Map<string, string[]>();
    const head = forall.forall;
    if ("predicate" in head) {
      const v = variableOf(head.predicate);
      if (v !== null)
        iterated.set(
          v,
          [...this.worldState].filter((f) => f[0] === "type").map((f) => f[1] as string),
        );
    } else
      for (const el of head.type_list)
        for (const item of el.items) {
          const v = variableOf(item);
          if (v !== null)
            iterated.set(
              v,
              [...this.worldState].filter((f) => f[0] === el.type_list_element).map((f) => f[1] as string),
            );
        }
    const collect = (r: EffectResults) => {
      res.added.push(...r.added);
      res.removed.push(...r.removed);
    };
    for (const [variable, values] of iterated)
      for (const value of values) {
        const local: VariableMap = new Map(vars);
        local.set(variable, value);
        for (const el of forall.body) {
          if ("when" in el) collect(this.resolveWhen(el, local));
          if ("and" in el)
            for (const item of el.and) {
              if ("predicate" in item || "not" in item) collect(this.resolveEffect(item, local));
              if ("when" in item) collect(this.resolveWhen(item, local));
            }
        }
      }
    return res;
  }

  /** `feedback_idx_from_precon_trace`: the index of the first failed precondition fact (root 'and'). */
  private feedbackIndex(): [number, TraceNode] {
    const root = this.preconTrace[this.preconTrace.length - 1];
    const leafIdx = (x: TraceNode): number =>
      "not" in x ? ((x.not as TraceNode).precon_idx as number) : (x.precon_idx as number);
    for (const item of root.and as TraceNode[]) {
      if (item.fulfilled) continue;
      if ("or" in item) {
        for (const orItem of item.or as TraceNode[]) {
          if ("and" in orItem) {
            for (const andItem of orItem.and as TraceNode[]) if (!andItem.fulfilled) return [leafIdx(andItem), andItem];
          } else if ("predicate_tuple" in orItem && !orItem.fulfilled) return [orItem.precon_idx as number, orItem];
        }
      } else if ("and" in item) {
        for (const andItem of item.and as TraceNode[]) if (!andItem.fulfilled) return [leafIdx(andItem), andItem];
      } else if ("predicate_tuple" in item) return [item.precon_idx as number, item];
      else if ("not" in item) return [leafIdx(item), item];
    }
    throw new AdventureInterpreterError(
      `${this.where()}: no failed precondition fact found (the reference raises TypeError)`,
    );
  }

  /** `resolve_action`: parameter types, preconditions (with the first failed fact's feedback), effects. */
  resolveAction(
    action: ActionDict,
  ): { ok: true; feedback: string; effects: EffectResults } | { ok: false; feedback: string; fail: FailInfo } {
    const def = this.actionTypes.get(action.type);
    if (!def) throw new AdventureInterpreterError(`${this.where()}: action ${action.type} is not defined`);
    const mapping = def.pddl_parameter_mapping as Record<string, string[]>;
    const feedbackDef = def.failure_feedback as { parameters: [string, string][]; precondition: [string, string][] };
    const vars: VariableMap = new Map();
    let varType: string | null | undefined;
    for (const param of def.interaction.parameters.type_list) {
      const paramType = param.type_list_element;
      for (const item of param.items) {
        const varId = variableOf(item);
        if (varId === null)
          throw new ResourceError(`adventuregame action ${action.type}: parameters must be variables`);
        const map = mapping[`?${varId}`];
        if (!map) throw new ResourceError(`adventuregame action ${action.type}: no parameter mapping for ?${varId}`);
        switch (map[0]) {
          case "arg1":
            vars.set(varId, action.arg1 as string);
            break;
          case "arg2":
            if ("arg2" in action) vars.set(varId, action.arg2 as string);
            else if (map.length === 2) {
              if (map[1] === "arg1_receptacle") {
                let arg1Var: string | null = null;
                for (const [k, v] of Object.entries(mapping))
                  if (v[0] === "arg1") {
                    arg1Var = k.slice(1);
                    break;
                  }
                const arg1Value = arg1Var === null ? undefined : vars.get(arg1Var);
                let receptacle: string | null = null;
                // assumes one instance per type: "<type>1" (reference)
                for (const f of this.worldState)
                  if ((f[0] === "in" || f[0] === "on") && f[1] === `${arg1Value}1`) {
                    receptacle = f[2] as string;
                    break;
                  }
                vars.set(varId, receptacle);
              }
            } else vars.set(varId, null);
            break;
          case "current_player_room":
            vars.set(varId, this.playerRoom());
            break;
          case "player":
            vars.set(varId, "player1");
            break;
          case "inventory":
            vars.set(varId, "inventory");
            break;
        }
        const value = vars.get(varId);
        if (value === undefined)
          throw new AdventureInterpreterError(
            `${this.where()}: ?${varId} of ${action.type} is unbound (the reference raises KeyError)`,
          );
        if (value) {
          if (endsWithDigit(value)) {
            if (this.instToType.has(value)) varType = this.instToType.get(value);
            else if (this.roomToType.has(value)) varType = this.roomToType.get(value);
            else if (varType === undefined)
              throw new AdventureInterpreterError(`${this.where()}: ${value} has no type (the reference raises)`);
          } else varType = value;
        } else varType = value;
        let matched = false;
        if (typeof varType === "string") {
          if (varType === paramType) matched = true;
          else if (this.domain.supertypes[varType]?.includes(paramType)) matched = true;
        } else matched = true;
        if (!matched) {
          const idx = Object.keys(mapping).indexOf(`?${varId}`);
          const [template, failType] = feedbackDef.parameters[idx];
          const feedback = pyCapitalize(renderTemplate(template, { [varId]: value }));
          return {
            ok: false,
            feedback,
            fail: {
              phase: "resolution",
              fail_type: failType,
              arg: { failed_action_type: action.type, failed_parameter: value },
            },
          };
        }
      }
    }
    const precondition = def.interaction.precondition[0];
    this.preconIdx = -1;
    this.preconTrace = [];
    this.checkConditions(precondition, vars, true, true);
    if (!this.preconTrace[this.preconTrace.length - 1]?.fulfilled) {
      const [idx, failed] = this.feedbackIndex();
      const [template, failType] = feedbackDef.precondition[idx];
      const clean: Record<string, unknown> = {};
      for (const [k, v] of vars) {
        if (v === null)
          throw new AdventureInterpreterError(
            `${this.where()}: ?${k} is None in failure feedback (the reference raises AttributeError)`,
          );
        clean[k] = endsWithDigit(v) ? this.instStr(v) : v;
      }
      return {
        ok: false,
        feedback: pyCapitalize(renderTemplate(template, clean)),
        fail: {
          phase: "resolution",
          fail_type: failType,
          arg: { failed_action_type: action.type, failed_precon_predicate: failed },
        },
      };
    }
    const root = def.interaction.effect;
    const effects = "and" in root[0] ? root[0].and : root;
    const changes: EffectResults = { added: [], removed: [] };
    for (const effect of effects) {
      const r =
        "forall" in effect
          ? this.resolveForall(effect, vars)
          : "when" in effect
            ? this.resolveWhen(effect, vars)
            : this.resolveEffect(effect, vars);
      changes.added.push(...r.added);
      changes.removed.push(...r.removed);
    }
    this.worldStateHistory.push(this.worldState.clone());
    const template = def.success_feedback as string;
    const args: Record<string, unknown> = {};
    for (const [k, v] of vars) args[k] = v && endsWithDigit(v) ? this.instStr(v) : v;
    if (template.includes("room_desc")) args.room_desc = this.fullRoomDesc();
    if (template.includes("inventory_desc")) args.inventory_desc = this.inventoryDesc();
    if (template.includes("prep")) {
      if ("prep" in action) args.prep = action.prep;
      else
        for (const f of changes.added)
          if (f[0] === "in" || f[0] === "on") {
            args.prep = f[0];
            break;
          }
    }
    if (template.includes("container_content")) {
      const opened = changes.added.find((f) => f[0] === "open");
      if (!opened) throw new AdventureInterpreterError(`${this.where()}: nothing was opened (the reference raises)`);
      args.container_content = this.containerContentDesc(opened[1] as string);
    }
    if (template.includes("arg1_desc")) args.arg1_desc = this.entityDesc(action.arg1 as string);
    return { ok: true, feedback: renderTemplate(template, args), effects: changes };
  }

  // ------------------------------------------------------------------ turns

  /** `process_action`: parse, resolve, update goals and exploration; the master logs `info`. */
  processAction(input: string): ActionResult {
    const parsed = this.parseActionInput(input);
    if (!parsed.ok) {
      this.trackExploration();
      const fail = { ...parsed.fail, exploration_info: this.explorationInfo() };
      return { goals: [...this.goalsAchieved], feedback: parsed.feedback, info: fail };
    }
    const resolved = this.resolveAction(parsed.action);
    if (!resolved.ok) {
      this.trackExploration();
      const fail = { ...resolved.fail, exploration_info: this.explorationInfo(parsed.action.type) };
      return { goals: [...this.goalsAchieved], feedback: resolved.feedback, info: fail };
    }
    this.goalsAchieved = this.goalState.intersection(this.worldState);
    const goals = [...this.goalsAchieved].map(factToString);
    this.trackExploration(resolved.effects);
    const info: Record<string, unknown> = {
      action_type: parsed.action.type,
      exploration_info: this.explorationInfo(parsed.action.type),
    };
    if (parsed.action.type === "done") info.done_action = true;
    return { goals, feedback: resolved.feedback, info };
  }

  /**
   * `execute_plan_sequence`: run planned commands up to the first failure, then roll the world back.
   * The rollback drops as many history entries as commands succeeded, while every command (also the failed
   * one) added an exploration snapshot, so the exploration state can keep what the first planned steps
   * revealed (reference).
   */
  executePlanSequence(commands: string[]): [GoalsAchieved, string, Record<string, unknown>][] {
    const out: [GoalsAchieved, string, Record<string, unknown>][] = [];
    let changes = 0;
    for (const cmd of commands) {
      const r = this.processAction(cmd);
      out.push([r.goals, r.feedback, r.info]);
      if ("fail_type" in r.info) break;
      changes++;
    }
    if (changes) {
      this.worldStateHistory = this.worldStateHistory.slice(0, -changes);
      this.explorationHistory = this.explorationHistory.slice(0, -changes);
      this.worldState = this.worldStateHistory[this.worldStateHistory.length - 1].clone();
      this.explorationState = this.explorationHistory[this.explorationHistory.length - 1].clone();
    }
    return out;
  }
}
