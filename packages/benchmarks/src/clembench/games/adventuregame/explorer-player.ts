// A rule-following scripted Adventurer that reads only what the game master shows: it takes the goals from
// the first message ("Put the pillow on the counter, ..."), maps rooms and passages from the room
// descriptions, opens closed containers while goal objects are still missing, carries goal objects (at most
// two, the limit of the invlimit variant) to their targets and then says "> done". Its state is rebuilt from
// the conversation on every call, so one backend can play any number of episodes, concurrently too.
import { type ChatTurn, ScriptedBackend } from "../../player.js";

interface Goal {
  thing: string;
  prep: string;
  target: string;
}

/** "a X, a Y and a Z" → [X, Y, Z] */
function listItems(s: string): string[] {
  return s
    .replace(/^an? /, "")
    .split(/, an? | and an? /)
    .map((x) => x.trim())
    .filter(Boolean);
}

class Knowledge {
  goals: Goal[] = [];
  plan = false;
  room = "";
  readonly exits = new Map<string, string[]>();
  /** where each thing was last seen (room) */
  readonly location = new Map<string, string>();
  /** containers seen closed, as "room|container" */
  readonly closed = new Set<string>();
  readonly held = new Set<string>();
  readonly delivered = new Set<number>();
  /** commands that failed (never retried) */
  readonly failed = new Set<string>();

  readIntro(text: string): void {
    this.plan = text.includes("Next actions:");
    const m = /Your goal for this game is: Put (.*?)\.\n/.exec(text);
    if (m)
      for (const g of m[1].matchAll(/the ([a-z ]+?) (on|in) the ([a-z ]+?)(?=, the | and the |$)/g))
        this.goals.push({ thing: g[1], prep: g[2], target: g[3] });
    const desc = text.lastIndexOf("You are in a ");
    if (desc >= 0) this.readRoom(text.slice(desc));
  }

  readRoom(text: string): void {
    const room = /^You are in a (.+?) now\./.exec(text);
    if (!room) return;
    this.room = room[1];
    const many = /There are (a .+?)\.(?= |$)/.exec(text);
    const one = /There is (a .+?)\.(?= |$)/.exec(text);
    const things = many && !many[1].startsWith("a passage") ? listItems(many[1]) : [];
    if (one && !one[1].startsWith("a passage")) things.push(...listItems(one[1]));
    for (const t of things) this.location.set(t, this.room);
    for (const c of text.matchAll(/The ([a-z ]+?) is closed\./g)) this.closed.add(`${this.room}|${c[1]}`);
    for (const c of text.matchAll(/The ([a-z ]+?) is open\./g)) this.closed.delete(`${this.room}|${c[1]}`);
    const passages = /There (?:is a passage|are passages) to (a .+?) here\./.exec(text);
    this.exits.set(this.room, passages ? listItems(passages[1]) : []);
  }

  apply(command: string, feedback: string): void {
    const [verb, ...rest] = command.split(" ");
    const arg = rest.join(" ");
    if (verb === "go") {
      if (feedback.startsWith("You are in a ")) this.readRoom(feedback);
      else this.failed.add(command);
    } else if (verb === "open") {
      const m = /^The ([a-z ]+?) is now open\. (.*)$/.exec(feedback);
      if (!m) {
        this.failed.add(command);
        return;
      }
      this.closed.delete(`${this.room}|${m[1]}`);
      const content = /there (?:is|are) (a .+)\.$/.exec(m[2]);
      if (content) for (const t of listItems(content[1])) this.location.set(t, this.room);
    } else if (verb === "take") {
      if (feedback.startsWith(`You take the ${arg}.`)) {
        this.held.add(arg);
        this.location.delete(arg);
      } else this.failed.add(command);
    } else if (verb === "put") {
      const m = /^You put the (.+?) (on|in) the (.+?)\.$/.exec(feedback);
      if (!m) {
        this.failed.add(command);
        return;
      }
      this.held.delete(m[1]);
      this.location.set(m[1], this.room);
      for (const [i, g] of this.goals.entries())
        if (g.thing === m[1] && g.prep === m[2] && g.target === m[3]) this.delivered.add(i);
    }
  }

  /** First step of a shortest known path from the current room to a room satisfying `want`. */
  private stepTowards(want: (room: string) => boolean): string | null {
    const prev = new Map<string, string>([[this.room, ""]]);
    const queue = [this.room];
    for (let head = 0; head < queue.length; head++) {
      const r = queue[head];
      if (r !== this.room && want(r)) {
        let step = r;
        while (prev.get(step) !== this.room) step = prev.get(step) as string;
        return step;
      }
      for (const n of this.exits.get(r) ?? [])
        if (!prev.has(n) && !this.failed.has(`go ${n}`)) {
          prev.set(n, r);
          queue.push(n);
        }
    }
    return null;
  }

  private ok(cmd: string): string | null {
    return this.failed.has(cmd) ? null : cmd;
  }

  next(): string {
    const open = this.goals.map((g, i) => ({ g, i })).filter(({ i }) => !this.delivered.has(i));
    if (open.length === 0) return "done";
    // deliver what is held when its target is here (opening a closed target first)
    for (const { g } of open)
      if (this.held.has(g.thing) && this.location.get(g.target) === this.room) {
        if (this.closed.has(`${this.room}|${g.target}`)) {
          const c = this.ok(`open ${g.target}`);
          if (c) return c;
        }
        const c = this.ok(`put ${g.thing} ${g.prep} ${g.target}`);
        if (c) return c;
      }
    // pick up goal objects lying here (two at most)
    if (this.held.size < 2)
      for (const { g } of open)
        if (!this.held.has(g.thing) && this.location.get(g.thing) === this.room) {
          const c = this.ok(`take ${g.thing}`);
          if (c) return c;
        }
    // look into closed containers while a goal object is still unseen
    const unseen = open.some(({ g }) => !this.held.has(g.thing) && !this.location.has(g.thing));
    if (unseen)
      for (const key of this.closed)
        if (key.startsWith(`${this.room}|`)) {
          const c = this.ok(`open ${key.slice(this.room.length + 1)}`);
          if (c) return c;
        }
    // walk to a held object's target, then to a known goal object, then to an unvisited room
    const targets = open.filter(({ g }) => this.held.has(g.thing)).map(({ g }) => this.location.get(g.target));
    const things =
      this.held.size < 2
        ? open.filter(({ g }) => !this.held.has(g.thing)).map(({ g }) => this.location.get(g.thing))
        : [];
    for (const wanted of [targets, things]) {
      const rooms = new Set(wanted.filter((r): r is string => r !== undefined));
      const step = this.stepTowards((r) => rooms.has(r));
      if (step) return `go ${step}`;
    }
    const explore = this.stepTowards((r) => !this.exits.has(r));
    if (explore) return `go ${explore}`;
    return "done";
  }
}

/** Rebuild the knowledge from the conversation: the intro, then (command, feedback) pairs. */
function knowledgeFrom(messages: ChatTurn[]): Knowledge {
  const k = new Knowledge();
  const users = messages.filter((m) => m.role === "user").map((m) => m.content);
  const commands = messages.filter((m) => m.role === "assistant").map((m) => m.content.slice(1).split("\n")[0].trim());
  k.readIntro(users[0] ?? "");
  for (const [i, c] of commands.entries()) k.apply(c, users[i + 1] ?? "");
  return k;
}

export function adventureExplorer(): ScriptedBackend {
  return new ScriptedBackend((messages) => {
    const k = knowledgeFrom(messages);
    const cmd = k.next();
    return k.plan ? `> ${cmd}\nNext actions: done` : `> ${cmd}`;
  });
}
