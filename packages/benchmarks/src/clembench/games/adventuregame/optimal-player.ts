// A scripted Adventurer that follows an instance's `optimal_commands` (the solver-made solution shipped with
// every adventuregame instance), then says "> done". In the planning variant each reply carries the rest of
// the solution as its `Next actions:` plan.
import { InstanceError } from "../../errors.js";
import type { GameInstance } from "../../instances.js";
import { ScriptedBackend } from "../../player.js";

export function adventureOptimalPlayer(instance: GameInstance): ScriptedBackend {
  const commands = instance.optimal_commands;
  if (!Array.isArray(commands) || !commands.every((c) => typeof c === "string"))
    throw new InstanceError(`adventuregame/${instance.game_id}: "optimal_commands" must be a list of strings`);
  const plan = instance.variant === "plan";
  // the turn is read from the conversation, so one backend can replay the instance any number of times
  return new ScriptedBackend((messages) => {
    const i = messages.filter((m) => m.role === "assistant").length;
    if (i >= commands.length) return "> done";
    const rest = commands.slice(i + 1);
    return plan ? `> ${commands[i]}\nNext actions: ${(rest.length ? rest : ["done"]).join(", ")}` : `> ${commands[i]}`;
  });
}
