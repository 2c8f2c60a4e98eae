// `kiln serve`: options checked before the model loads, so a bad one fails at once. vLLM's names are
// accepted as aliases (`--served-model-name`, `--max-model-len`, `--max-num-seqs`) so a command line
// written for `vllm serve` carries over where kiln has the same setting.
import { existsSync } from "node:fs";
import { type AdapterSpec, parseAdapterSpecs } from "../policies.js";
import { startServe } from "../serve.js";
import { UsageError, defineCommand } from "./args.js";
import { MODEL_BACKENDS } from "./model-commands.js";

export const serveCommand = defineCommand({
  name: "serve",
  summary: "an OpenAI-compatible server (chat completions with tools and log-probs, completions) for a model directory",
  description:
    "A model without a chat template (a base model such as stories260K) needs --chat-template. Ctrl-C stops the server.",
  positionals: [{ name: "model-dir", description: "a Hugging Face model directory" }],
  options: {
    host: { type: "string", default: "127.0.0.1", placeholder: "ADDR", description: "address to listen on" },
    port: { type: "integer", default: 8000, min: 0, max: 65535, description: "port (0: any free one)" },
    "served-model-name": {
      type: "string",
      multiple: true,
      aliases: ["model-id"],
      placeholder: "NAME",
      description: "the model name clients send, repeated for aliases (default: the model directory)",
    },
    "max-model-len": {
      type: "integer",
      min: 1,
      description: "the context the server admits, prompt + max_tokens (default and upper bound: the model's)",
    },
    "max-concurrency": {
      type: "integer",
      default: 1,
      min: 1,
      aliases: ["max-num-seqs"],
      description: "requests generated at once",
    },
    "max-queue": { type: "integer", default: 256, min: 0, description: "requests waiting beyond those (then 429)" },
    "max-tokens-limit": { type: "integer", min: 1, description: "largest max_tokens accepted (default: the context)" },
    "api-key": {
      type: "string",
      placeholder: "KEY",
      description: "required Bearer key (default: $KILN_API_KEY; none: open)",
    },
    "chat-template": {
      type: "string",
      placeholder: "chatml|FILE",
      description: "a chat template for a model without one",
    },
    adapter: {
      type: "strings",
      multiple: true,
      placeholder: "DIR[,DIR…]",
      description: "PEFT LoRA adapters applied together",
    },
    "adapter-scale": {
      type: "string",
      placeholder: "S[,S…]",
      description: "one scale for all adapters or one per adapter",
    },
    backend: {
      type: "string",
      choices: MODEL_BACKENDS,
      default: "wasm",
      description: "tensor backend of the model worker",
    },
    threads: {
      type: "integer",
      min: 1,
      description: "threads of the worker's backend (default: the backend's own, min(2, cores))",
    },
    "prefix-cache-bytes": {
      type: "integer",
      min: 0,
      placeholder: "BYTES",
      description:
        "KV rows of shared prompt prefixes kept for reuse across requests (default 268435456 = 256 MiB; 0: off)",
    },
  },
  examples: [
    "kiln serve packages/kit/data/agent-model --port 8000",
    "kiln serve runs/arp/base --adapter runs/arp/adapter --served-model-name arp --max-model-len 2048",
  ],
  run: async ({ positionals: [dir], values }) => {
    if (values.host.trim() === "") throw new UsageError("--host needs an address");
    const apiKey = values["api-key"] ?? process.env.KILN_API_KEY;
    if (apiKey !== undefined && apiKey === "") throw new UsageError("--api-key (or KILN_API_KEY) must not be empty");
    const chatTemplate = values["chat-template"];
    if (chatTemplate !== undefined && chatTemplate !== "chatml" && !existsSync(chatTemplate))
      throw new UsageError(`--chat-template: not "chatml" and no file ${chatTemplate}`);
    // The first name is the one responses carry, the others are aliases (as vLLM's).
    const names = values["served-model-name"];
    const duplicate = names.find((n, i) => names.indexOf(n) !== i);
    if (duplicate !== undefined) throw new UsageError(`--served-model-name ${duplicate} is given twice`);
    let adapters: AdapterSpec[];
    try {
      adapters = parseAdapterSpecs(
        values.adapter.length ? values.adapter.join(",") : undefined,
        values["adapter-scale"],
      );
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const maxTokensLimit = values["max-tokens-limit"];
    const maxModelLen = values["max-model-len"];
    const serve = await startServe({
      dir,
      host: values.host,
      port: values.port,
      maxConcurrency: values["max-concurrency"],
      maxQueue: values["max-queue"],
      backend: values.backend,
      ...(values.threads !== undefined ? { threads: values.threads } : {}),
      ...(values["prefix-cache-bytes"] !== undefined ? { prefixCacheBytes: values["prefix-cache-bytes"] } : {}),
      ...(maxTokensLimit !== undefined ? { maxTokensLimit } : {}),
      ...(maxModelLen !== undefined ? { maxModelLen } : {}),
      ...(apiKey !== undefined ? { apiKey } : {}),
      ...(chatTemplate !== undefined ? { chatTemplate } : {}),
      adapters,
      servedModelNames: names.length > 0 ? names : [dir],
      log: (line) => console.error(line),
      warn: (line) => console.error(`warning: ${line}`),
    });
    const { contextLength, hasChatTemplate } = serve.info;
    console.log(
      `kiln serve: OpenAI-compatible API for ${dir} as "${names[0] ?? dir}" at ${serve.server.url}/v1 (context ${contextLength} tokens${
        hasChatTemplate ? "" : "; no chat template: /v1/completions only, or pass --chat-template chatml|FILE"
      }${apiKey !== undefined ? "; API key required" : ""}; Ctrl-C to stop)`,
    );
    await new Promise<void>((resolve) => {
      const stop = () => resolve();
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
    await serve.close();
    return 0;
  },
});
