import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  ModelCardError,
  buildRepoFiles,
  RepoFileError,
  makeModelCard,
  parseModelCard,
  parseModelConfig,
  parsePythonJson,
  pyFloat,
  pythonFloatRepr,
  pythonJsonDumps,
  readRepoConfigs,
  serializeModelCard,
  serializeModelConfig,
  serializeTokenizerConfig,
  writeRepoFiles,
} from "../src/index.js";
import { tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);

describe("Python-compatible JSON", () => {
  it("formats floats as Python's repr", () => {
    const cases: [number, string][] = [
      [1e-5, "1e-05"],
      [1e-6, "1e-06"],
      [0.0001, "0.0001"],
      [10000, "10000.0"],
      [1e16, "1e+16"],
      [1e15, "1000000000000000.0"],
      [1.5e16, "1.5e+16"],
      [0.1, "0.1"],
      [-2.5, "-2.5"],
      [123.456, "123.456"],
      [3e-7, "3e-07"],
      [1.2345e-10, "1.2345e-10"],
      [-0, "-0.0"],
      [Number.NaN, "NaN"],
      [Number.POSITIVE_INFINITY, "Infinity"],
    ];
    for (const [x, want] of cases) expect(pythonFloatRepr(x)).toBe(want);
  });

  it("dumps like json.dumps(indent=2, sort_keys=True) with and without ensure_ascii", () => {
    const v = { b: [1, pyFloat(2), []], a: { é: "ü\u007f\n" }, c: {}, d: null, "\u{1F600}": true, Z: 0.5 };
    expect(pythonJsonDumps(v, { indent: 2, sortKeys: true })).toBe(
      '{\n  "Z": 0.5,\n  "a": {\n    "\\u00e9": "\\u00fc\\u007f\\n"\n  },\n  "b": [\n    1,\n    2.0,\n    []\n  ],\n  "c": {},\n  "d": null,\n  "\\ud83d\\ude00": true\n}',
    );
    expect(pythonJsonDumps({ a: "é", b: [1, 2] }, { ensureAscii: false })).toBe('{"a": "é", "b": [1, 2]}');
  });
});

describe("repo files", () => {
  it("writes config.json as transformers does and reads the repo back", async () => {
    const dir = join(tmp.dir, "repo");
    const config = { model_type: "llama", rope_theta: pyFloat(10000), rms_norm_eps: 1e-6, vocab_size: 512 };
    await writeRepoFiles(
      dir,
      new Map([
        ["config.json", serializeModelConfig(config)],
        ["tokenizer_config.json", serializeTokenizerConfig({ bos_token: "<s>", chat_template: "{{ x }}", name: "ü" })],
        ["tokenizer.json", JSON.stringify({ model: { type: "BPE", vocab: {}, merges: [] } })],
        ["generation_config.json", serializeModelConfig({ bos_token_id: 1 })],
      ]),
    );
    expect(serializeModelConfig(config)).toBe(
      '{\n  "model_type": "llama",\n  "rms_norm_eps": 1e-06,\n  "rope_theta": 10000.0,\n  "vocab_size": 512\n}\n',
    );
    let repo = await readRepoConfigs(dir);
    expect(repo.config.vocab_size).toBe(512);
    expect(repo.tokenizerConfig?.name).toBe("ü");
    expect(repo.chatTemplate).toBe("{{ x }}"); // from tokenizer_config.json when no .jinja file
    writeFileSync(join(dir, "chat_template.jinja"), "{% for m in messages %}{{ m.content }}{% endfor %}");
    repo = await readRepoConfigs(dir);
    expect(repo.chatTemplate).toContain("{% for m in messages %}");
    expect(repo.generationConfig).toEqual({ bos_token_id: 1 });
    // Round trip through buildRepoFiles gives the same configs back.
    const dir2 = join(tmp.dir, "repo2");
    await writeRepoFiles(dir2, buildRepoFiles({ ...repo, modelCard: "---\nlicense: mit\n---\n" }));
    const again = await readRepoConfigs(dir2);
    expect(again).toEqual(repo);
  });

  it("re-serializes a config.json saved by transformers byte for byte (floats like 0.0 kept)", () => {
    const text = readFileSync(new URL("./fixtures/repo/pythia-410m-seqcls.config.json", import.meta.url), "utf8");
    const cfg = parseModelConfig(text);
    expect(cfg.attention_dropout).toBe(0);
    expect(cfg.id2label).toEqual({ 0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2" });
    expect(serializeModelConfig(cfg)).toBe(text);
    // Without the parser's float marks the same values would print as 0.
    expect(serializeModelConfig({ ...cfg })).not.toBe(text);
  });

  it("parsePythonJson agrees with JSON.parse and reports syntax errors", () => {
    const text = '{"a": [1, 2.5, -0.0, 1e-05, {"b": null}], "c": "\\u00e9\\n", "d": true, "__proto__": 1}';
    expect(JSON.stringify(parsePythonJson(text))).toBe(JSON.stringify(JSON.parse(text)));
    expect(pythonJsonDumps(parsePythonJson("[1.0, 2, 3e0]"))).toBe("[1.0, 2, 3.0]");
    for (const bad of ["{", '{"a" 1}', "[1,]", "01", '"\\x"', "{} x"])
      expect(() => parsePythonJson(bad), bad).toThrow(SyntaxError);
  });

  it("refuses bad repo files with the file named", async () => {
    expect(() => parseModelConfig("{}")).toThrow(/config.json: "model_type"/);
    expect(() => parseModelConfig("[1]")).toThrow(RepoFileError);
    const dir = join(tmp.dir, "broken");
    mkdirSync(dir, { recursive: true });
    await expect(readRepoConfigs(dir)).rejects.toThrow(/no config.json/);
    writeFileSync(join(dir, "config.json"), '{"model_type":"llama"}');
    writeFileSync(join(dir, "tokenizer.json"), '{"model":{}}');
    await expect(readRepoConfigs(dir)).rejects.toThrow(/tokenizer.json: "model.type"/);
    await expect(writeRepoFiles(dir, new Map([["../x", "y"]]))).rejects.toThrow(/outside the repo/);
  });
});

describe("model card", () => {
  it("writes and parses YAML front matter with the Hub's fields", () => {
    const text = makeModelCard(
      {
        base_model: "karpathy/tinyllamas",
        library_name: "peft",
        license: "mit",
        tags: ["kiln", "lora", "dpo"],
        datasets: ["roneneldan/TinyStories"],
      },
      "# stories260K-lora\n\nA LoRA adapter.\n",
    );
    expect(text).toBe(
      "---\nbase_model: karpathy/tinyllamas\nlibrary_name: peft\nlicense: mit\ntags:\n- kiln\n- lora\n- dpo\ndatasets:\n- roneneldan/TinyStories\n---\n\n# stories260K-lora\n\nA LoRA adapter.\n",
    );
    const card = parseModelCard(text);
    expect(card.data).toEqual({
      base_model: "karpathy/tinyllamas",
      library_name: "peft",
      license: "mit",
      tags: ["kiln", "lora", "dpo"],
      datasets: ["roneneldan/TinyStories"],
    });
    expect(card.body).toBe("\n# stories260K-lora\n\nA LoRA adapter.\n");
    expect(serializeModelCard(card)).toBe(text);
  });

  it("reads indented and flow lists, quoted scalars, and keeps unsupported keys verbatim", () => {
    const text = [
      "---",
      "license: apache-2.0",
      "language: [en, 'fr']",
      "tags:",
      "  - 'yes'",
      '  - "a: b"',
      "inference: false",
      "model-index:",
      "- name: x",
      "  results: []",
      "---",
      "body",
    ].join("\n");
    const card = parseModelCard(text);
    expect(card.data).toEqual({
      license: "apache-2.0",
      language: ["en", "fr"],
      tags: ["yes", "a: b"],
      inference: false,
    });
    expect(card.raw["model-index"]).toBe("model-index:\n- name: x\n  results: []");
    const again = parseModelCard(serializeModelCard(card));
    expect(again.data).toEqual(card.data);
    expect(again.raw).toEqual(card.raw);
    expect(parseModelCard("# no front matter\n")).toEqual({ data: {}, raw: {}, body: "# no front matter\n" });
    expect(() => parseModelCard("---\n: bad\n---\n")).toThrow(ModelCardError);
    expect(() => parseModelCard("---\nx: 'open\n---\n")).toThrow(/unterminated/);
  });
});
