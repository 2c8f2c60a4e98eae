// `kiln agent-model`: rebuild the embedded agent model (the committed one was made with the defaults).
import { type ParsedArgs, UsageError, intFlag, strFlag } from "../cli-main.js";
import { buildAgentModel } from "./build.js";
import { agentModelCorpusExtras } from "./extras.js";

export async function runAgentModelCommand(args: ParsedArgs): Promise<number> {
  const { initBackend, setBackend } = await import("@kiln/tensor");
  const backend = strFlag(args.flags, "backend", "wasm")!;
  if (!["wasm", "native", "js"].includes(backend))
    throw new UsageError(`--backend must be wasm, native or js, got ${backend}`);
  if (backend === "js") setBackend("js");
  else await initBackend(backend as "wasm" | "native");
  const seed = intFlag(args.flags, "seed", 0);
  const out = strFlag(args.flags, "out", "agent-model")!;
  const r = await buildAgentModel({
    outDir: out,
    seed,
    steps: intFlag(args.flags, "steps", 600),
    extraDocuments: await agentModelCorpusExtras(seed),
    progress: args.flags.progress !== "false",
  });
  console.log(JSON.stringify(r));
  return 0;
}
