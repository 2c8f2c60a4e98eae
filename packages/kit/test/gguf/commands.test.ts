// `kiln export gguf` / `kiln convert gguf` through the CLI table: files written, inputs protected,
// typos refused with exit 2 before anything is written.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GgufFile, SafetensorsFile } from "@kiln/hub-io";
import { attachLora, saveAdapter } from "@kiln/lora";
import { loadModel } from "@kiln/models";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { agentModelDir } from "../../src/agent-model/paths.js";
import { main } from "../../src/cli-main.js";
import { acquireDirLock } from "../../src/dir-lock.js";

const tmp = mkdtempSync(join(tmpdir(), "kiln-gguf-cli-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());
const agentDir = agentModelDir();

function capture(): { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(console, "log").mockImplementation((...a) => void out.push(a.join(" ")));
  vi.spyOn(console, "error").mockImplementation((...a) => void err.push(a.join(" ")));
  return { out, err };
}

describe("kiln export gguf / convert gguf", () => {
  it("exports the agent model as q8_0 and converts it back to a directory kiln loads", async () => {
    const io = capture();
    const out = join(tmp, "agent.gguf");
    expect(await main(["export", "gguf", agentDir, out, "--dtype", "q8_0"])).toBe(0);
    expect(io.out[0]).toMatch(/wrote model .*agent\.gguf \(qwen3, \d+ tensors: \d+ Q8_0, \d+ F32/);
    const f = await GgufFile.open(out);
    expect(f.get("general.architecture")).toBe("qwen3");
    expect(f.get("general.file_type")).toBe(7);
    expect(f.get("tokenizer.chat_template")).toBe(readFileSync(join(agentDir, "chat_template.jinja"), "utf8"));
    await f.close();
    const hf = join(tmp, "agent-hf");
    expect(await main(["convert", "gguf", out, hf])).toBe(0);
    expect(readdirSync(hf).sort()).toEqual([
      "chat_template.jinja",
      "config.json",
      "generation_config.json",
      "model.safetensors",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
    const st = await SafetensorsFile.open(join(hf, "model.safetensors"));
    expect(st.info("model.layers.0.self_attn.q_proj.weight").dtype).toBe("F32");
    await st.close();
    const model = await loadModel(hf);
    expect(model.config.architecture).toBe("Qwen3ForCausalLM");
  });

  it("exports a PEFT adapter directory as a GGUF LoRA", async () => {
    const io = capture();
    const model = await loadModel(agentDir);
    const adapter = attachLora(model, { r: 2, alpha: 4, targetModules: ["q_proj", "v_proj"] });
    const dir = join(tmp, "adapter");
    await saveAdapter(adapter, dir);
    const out = join(tmp, "adapter.gguf");
    expect(await main(["export", "gguf", dir, out, "--base", agentDir])).toBe(0);
    expect(io.out[0]).toMatch(/wrote adapter/);
    const f = await GgufFile.open(out);
    expect(f.get("general.type")).toBe("adapter");
    expect(f.get("adapter.lora.alpha")).toBe(4);
    await f.close();
  });

  it("refuses an output that is or is inside an input, an existing output, and unknown dtypes (exit 2, nothing written)", async () => {
    const io = capture();
    const copy = join(tmp, "copy");
    mkdirSync(copy);
    for (const name of readdirSync(agentDir)) writeFileSync(join(copy, name), readFileSync(join(agentDir, name)));
    expect(await main(["export", "gguf", copy, join(copy, "m.gguf")])).toBe(2);
    expect(io.err.at(-1)).toMatch(/is inside the input/);
    expect(existsSync(join(copy, "m.gguf"))).toBe(false);
    expect(await main(["export", "gguf", copy, copy])).toBe(2);
    expect(await main(["export", "gguf", copy, join(tmp, "x.gguf"), "--dtype", "q4_k"])).toBe(2);
    expect(io.err.at(-1)).toMatch(/--dtype/);
    expect(existsSync(join(tmp, "x.gguf"))).toBe(false);
    writeFileSync(join(tmp, "exists.gguf"), "x");
    expect(await main(["export", "gguf", copy, join(tmp, "exists.gguf")])).toBe(2);
    expect(io.err.at(-1)).toMatch(/already exists.*--overwrite/);
    expect(readFileSync(join(tmp, "exists.gguf"), "utf8")).toBe("x");
    expect(await main(["convert", "gguf", join(tmp, "exists.gguf"), join(tmp, "exists.gguf")])).toBe(2);
    // An output another live process is writing is refused naming it, and left alone.
    const busy = join(tmp, "busy.gguf");
    const lock = acquireDirLock(busy, "another export");
    await expect(main(["export", "gguf", copy, busy])).rejects.toThrow(/in use by pid \d+ .*another export/);
    lock.release();
    expect(existsSync(busy)).toBe(false);
    expect(await main(["export", "gguf", "--help"])).toBe(0);
    expect(io.out.join("\n")).toMatch(/--dtype.*f32.*q8_0/s);
  });
});
