// Tokenizers between Hugging Face tokenizer.json and GGUF's `tokenizer.ggml.*` keys, as llama.cpp
// reads them (src/llama-vocab.cpp): a BPE with byte fallback is SentencePiece-style (`llama`: pieces
// with "▁", scores, token types), any other BPE is byte-level (`gpt2`: tokens in GPT-2's byte-to-
// unicode alphabet, "left right" merges, a named pre-tokenizer). Token types are llama.cpp's
// LLAMA_TOKEN_TYPE: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.

import { GgufConvertError } from "./errors.js";
import { type GgufMetadata, ggufPlain, ggufValue } from "./gguf.js";
import { llama2cTokenizerJson } from "./llama2c-tokenizer.js";
import type { JsonObject } from "./repo-files.js";

export const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;

/** GPT-2's byte → printable code point table (bytes_to_unicode). */
function byteTables(): { toChar: string[]; toByte: Map<string, number> } {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  const toChar: string[] = new Array(256);
  bs.forEach((b, i) => {
    toChar[b] = String.fromCodePoint(cs[i]);
  });
  return { toChar, toByte: new Map(toChar.map((c, b) => [c, b])) };
}
const BYTES = byteTables();

/** Text → GPT-2 byte-level form (each UTF-8 byte one printable character). */
export function toByteLevel(text: string): string {
  let out = "";
  for (const b of new TextEncoder().encode(text)) out += BYTES.toChar[b];
  return out;
}

/** Pre-tokenizer regexes of the tokenizer.json files llama.cpp names (llama-vocab.cpp). */
const PRE_REGEX: Record<string, string> = {
  qwen2:
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  "llama-bpe":
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen35:
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  "gpt-2": "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
};

interface AddedToken {
  id: number;
  content: string;
  special?: boolean;
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function tokenText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (isObject(v) && typeof v.content === "string") return v.content;
  return undefined;
}

function hasKind(node: unknown, type: string): boolean {
  if (!isObject(node)) return false;
  if (node.type === type) return true;
  const children = (node.pretokenizers ?? node.normalizers ?? node.decoders) as unknown[] | undefined;
  return Array.isArray(children) && children.some((c) => hasKind(c, type));
}

function splitRegex(node: unknown): string | undefined {
  if (!isObject(node)) return undefined;
  if (node.type === "Split" && isObject(node.pattern) && typeof node.pattern.Regex === "string")
    return node.pattern.Regex;
  const children = node.pretokenizers as unknown[] | undefined;
  if (Array.isArray(children))
    for (const c of children) {
      const r = splitRegex(c);
      if (r !== undefined) return r;
    }
  return undefined;
}

export interface TokenizerToGgufInput {
  tokenizer: JsonObject;
  tokenizerConfig?: JsonObject;
  config: JsonObject;
  generationConfig?: JsonObject;
  chatTemplate?: string;
  /** llama.cpp architecture, to pick the pre-tokenizer name when the regex is not one llama.cpp knows. */
  arch: string;
}

export interface TokenizerToGguf {
  metadata: GgufMetadata;
  /** What llama.cpp will do differently from the tokenizer.json, in words (empty when nothing). */
  notes: string[];
}

/** tokenizer.json (+ tokenizer_config.json, config ids, chat template) → `tokenizer.*` GGUF keys. */
export function tokenizerToGguf(input: TokenizerToGgufInput): TokenizerToGguf {
  const { tokenizer, config } = input;
  const tokCfg = input.tokenizerConfig ?? {};
  const model = tokenizer.model;
  if (!isObject(model) || model.type !== "BPE" || !isObject(model.vocab)) {
    throw new GgufConvertError(
      `tokenizer.json: model type ${JSON.stringify(isObject(model) ? model.type : model)} has no GGUF export (BPE only)`,
    );
  }
  const vocabSize = config.vocab_size as number;
  const vocab = model.vocab as Record<string, number>;
  const added = (Array.isArray(tokenizer.added_tokens) ? tokenizer.added_tokens : []) as AddedToken[];
  const spm = model.byte_fallback === true;
  const byteLevel = hasKind(tokenizer.pre_tokenizer, "ByteLevel") || hasKind(tokenizer.decoder, "ByteLevel");
  const notes: string[] = [];

  const tokens: string[] = new Array(vocabSize);
  const types = new Int32Array(vocabSize);
  const addedById = new Map(added.map((t) => [t.id, t]));
  const place = (id: number, text: string, type: number) => {
    if (!Number.isInteger(id) || id < 0)
      throw new GgufConvertError(`tokenizer.json: token ${JSON.stringify(text)} has id ${id}`);
    if (id >= vocabSize) {
      throw new GgufConvertError(
        `tokenizer.json: token ${JSON.stringify(text)} has id ${id}, outside the model's vocab_size ${vocabSize}`,
      );
    }
    tokens[id] = text;
    types[id] = type;
  };
  const unk = typeof model.unk_token === "string" ? model.unk_token : undefined;
  for (const [text, id] of Object.entries(vocab)) {
    if (addedById.has(id)) continue;
    const type =
      text === unk ? TOKEN_TYPE.unknown : spm && /^<0x[0-9A-F]{2}>$/.test(text) ? TOKEN_TYPE.byte : TOKEN_TYPE.normal;
    place(id, spm || byteLevel ? text : toByteLevel(text), type);
  }
  for (const t of added) {
    place(
      t.id,
      t.content,
      t.content === unk ? TOKEN_TYPE.unknown : t.special ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined,
    );
  }
  let padded = 0;
  for (let i = 0; i < vocabSize; i++) {
    if (tokens[i] === undefined) {
      tokens[i] = `[PAD${i}]`;
      types[i] = TOKEN_TYPE.unused;
      padded++;
    }
  }
  if (padded > 0) notes.push(`${padded} ids the tokenizer does not use are "[PADn]" tokens of type unused`);

  const rawMerges = (Array.isArray(model.merges) ? model.merges : []) as (string | [string, string])[];
  const merges = rawMerges.map((m): [string, string] => {
    if (Array.isArray(m)) return [m[0], m[1]];
    const i = m.indexOf(" ", 1);
    return [m.slice(0, i), m.slice(i + 1)];
  });

  const meta: GgufMetadata = new Map();
  const idOf = (v: unknown): number | undefined => {
    const text = tokenText(v);
    if (text === undefined) return undefined;
    return added.find((t) => t.content === text)?.id ?? vocab[text];
  };
  const firstId = (v: unknown): number | undefined =>
    typeof v === "number" ? v : Array.isArray(v) && typeof v[0] === "number" ? v[0] : undefined;

  if (spm) {
    meta.set("tokenizer.ggml.model", ggufValue.string("llama"));
    meta.set("tokenizer.ggml.tokens", ggufValue.array("string", tokens));
    // llama.cpp's SentencePiece merges the adjacent pair whose joined piece scores highest; a BPE
    // merges by rank, so the piece a merge first produces scores minus that rank.
    const scores = new Float32Array(vocabSize);
    const produced = new Set<number>();
    merges.forEach(([l, r], rank) => {
      const id = vocab[l + r];
      if (id !== undefined && !produced.has(id)) {
        produced.add(id);
        scores[id] = -rank;
      }
    });
    let unreachable = 0;
    for (let i = 0; i < vocabSize; i++) {
      if (types[i] === TOKEN_TYPE.normal && [...tokens[i]].length > 1 && !produced.has(i)) {
        scores[i] = -1e9;
        unreachable++;
      }
    }
    if (unreachable > 0) notes.push(`${unreachable} multi-character pieces no merge produces get the lowest score`);
    meta.set("tokenizer.ggml.scores", ggufValue.array("f32", scores));
    meta.set("tokenizer.ggml.token_type", ggufValue.array("i32", types));
    meta.set("tokenizer.ggml.add_space_prefix", ggufValue.bool(hasKind(tokenizer.normalizer, "Prepend")));
    if (hasKind(tokenizer.normalizer, "Replace") && JSON.stringify(tokenizer.normalizer).includes(" {2,}")) {
      notes.push(
        "the tokenizer collapses runs of spaces (remove_extra_whitespaces); llama.cpp's SentencePiece does not",
      );
    }
  } else {
    meta.set("tokenizer.ggml.model", ggufValue.string("gpt2"));
    const regex = splitRegex(tokenizer.pre_tokenizer);
    let pre = Object.entries(PRE_REGEX).find(([, r]) => r === regex)?.[0];
    if (pre === undefined && byteLevel && regex === undefined) pre = "gpt-2";
    if (pre === undefined) {
      pre = input.arch.startsWith("qwen") ? "qwen2" : "gpt-2";
      notes.push(
        `pre-tokenizer ${regex !== undefined ? `regex ${JSON.stringify(regex)}` : JSON.stringify(tokenizer.pre_tokenizer)} is not one llama.cpp knows; it splits text with its "${pre}" rules instead, which can give other ids for some texts (e.g. runs of spaces, non-ASCII letters); ids given directly are unaffected`,
      );
    }
    meta.set("tokenizer.ggml.pre", ggufValue.string(pre));
    meta.set("tokenizer.ggml.tokens", ggufValue.array("string", tokens));
    meta.set("tokenizer.ggml.token_type", ggufValue.array("i32", types));
    const conv = byteLevel ? (s: string) => s : toByteLevel;
    meta.set(
      "tokenizer.ggml.merges",
      ggufValue.array(
        "string",
        merges.map(([l, r]) => `${conv(l)} ${conv(r)}`),
      ),
    );
  }
  const gen = input.generationConfig ?? {};
  const eos = firstId(gen.eos_token_id) ?? firstId(config.eos_token_id) ?? idOf(tokCfg.eos_token);
  const bos = firstId(config.bos_token_id) ?? firstId(gen.bos_token_id) ?? idOf(tokCfg.bos_token);
  const pad = firstId(config.pad_token_id) ?? firstId(gen.pad_token_id) ?? idOf(tokCfg.pad_token);
  if (bos !== undefined) meta.set("tokenizer.ggml.bos_token_id", ggufValue.u32(bos));
  if (eos !== undefined) meta.set("tokenizer.ggml.eos_token_id", ggufValue.u32(eos));
  if (unk !== undefined && vocab[unk] !== undefined)
    meta.set("tokenizer.ggml.unknown_token_id", ggufValue.u32(vocab[unk]));
  if (pad !== undefined) meta.set("tokenizer.ggml.padding_token_id", ggufValue.u32(pad));
  const postAddsBos =
    isObject(tokenizer.post_processor) &&
    Array.isArray(tokenizer.post_processor.single) &&
    isObject(tokenizer.post_processor.single[0]) &&
    "SpecialToken" in tokenizer.post_processor.single[0];
  const addBos = typeof tokCfg.add_bos_token === "boolean" ? tokCfg.add_bos_token : postAddsBos;
  meta.set("tokenizer.ggml.add_bos_token", ggufValue.bool(addBos && bos !== undefined));
  meta.set("tokenizer.ggml.add_eos_token", ggufValue.bool(tokCfg.add_eos_token === true));
  if (input.chatTemplate !== undefined) meta.set("tokenizer.chat_template", ggufValue.string(input.chatTemplate));
  return { metadata: meta, notes };
}

export interface TokenizerFromGguf {
  tokenizer: JsonObject;
  tokenizerConfig: JsonObject;
  chatTemplate?: string;
  bosTokenId?: number;
  eosTokenId?: number;
  padTokenId?: number;
  /** Where the tokenizer.json splits text otherwise than llama.cpp would, in words. */
  notes: string[];
}

/** `tokenizer.ggml.*` keys → tokenizer.json + tokenizer_config.json (llama and gpt2 models). */
export function tokenizerFromGguf(meta: GgufMetadata): TokenizerFromGguf {
  const get = (k: string) => {
    const v = meta.get(k);
    return v === undefined ? undefined : ggufPlain(v);
  };
  const kind = get("tokenizer.ggml.model");
  const tokens = get("tokenizer.ggml.tokens") as string[] | undefined;
  if (!Array.isArray(tokens)) throw new GgufConvertError("GGUF has no tokenizer.ggml.tokens");
  const types = (get("tokenizer.ggml.token_type") as number[] | undefined) ?? [];
  const num = (k: string) => {
    const v = get(k);
    return typeof v === "number" ? v : undefined;
  };
  const bos = num("tokenizer.ggml.bos_token_id");
  const eos = num("tokenizer.ggml.eos_token_id");
  const pad = num("tokenizer.ggml.padding_token_id");
  const unkId = num("tokenizer.ggml.unknown_token_id");
  const addBos = get("tokenizer.ggml.add_bos_token") === true;
  const addEos = get("tokenizer.ggml.add_eos_token") === true;
  const chatTemplate = get("tokenizer.chat_template");
  const special = (id: number | undefined) => (id === undefined || id >= tokens.length ? null : tokens[id]);
  const tokenizerConfig: JsonObject = {
    add_bos_token: addBos,
    add_eos_token: addEos,
    bos_token: special(bos),
    eos_token: special(eos),
    pad_token: special(pad),
    unk_token: special(unkId),
    clean_up_tokenization_spaces: false,
    model_max_length: 131072,
    tokenizer_class: "PreTrainedTokenizerFast",
  };
  let tokenizer: JsonObject;
  const notes: string[] = [];
  if (kind === "llama") {
    const scores = (get("tokenizer.ggml.scores") as number[] | undefined) ?? tokens.map(() => 0);
    tokenizer = llama2cTokenizerJson(
      {
        maxTokenLength: Math.max(...tokens.map((t) => t.length)),
        pieces: tokens.map((t, i) => ({
          text: types[i] === TOKEN_TYPE.byte || types[i] === TOKEN_TYPE.control ? t : t.replaceAll("\u2581", " "),
          score: scores[i],
        })),
      },
      { removeExtraWhitespaces: false },
    );
    if (get("tokenizer.ggml.add_space_prefix") === false) {
      const norm = tokenizer.normalizer as JsonObject;
      norm.normalizers = (norm.normalizers as JsonObject[]).filter((n) => n.type !== "Prepend");
    }
    if (!addBos) tokenizer.post_processor = null;
  } else if (kind === "gpt2") {
    const merges = (get("tokenizer.ggml.merges") as string[] | undefined) ?? [];
    const pre = get("tokenizer.ggml.pre");
    const known = typeof pre === "string" ? PRE_REGEX[pre] : PRE_REGEX["gpt-2"];
    const regex = known ?? PRE_REGEX["gpt-2"];
    if (known === undefined) {
      notes.push(
        `tokenizer.ggml.pre ${JSON.stringify(pre)} is not one kiln knows (${Object.keys(PRE_REGEX).join(", ")}); text is split with the "gpt-2" rules instead, which can give other ids than llama.cpp for some texts; ids given directly are unaffected`,
      );
    }
    const vocab: Record<string, number> = {};
    const addedTokens: JsonObject[] = [];
    tokens.forEach((t, i) => {
      if (!(t in vocab)) vocab[t] = i;
      if (types[i] === TOKEN_TYPE.control || types[i] === TOKEN_TYPE.userDefined) {
        addedTokens.push({
          id: i,
          content: t,
          single_word: false,
          lstrip: false,
          rstrip: false,
          normalized: types[i] !== TOKEN_TYPE.control,
          special: types[i] === TOKEN_TYPE.control,
        });
      }
    });
    tokenizer = {
      version: "1.0",
      truncation: null,
      padding: null,
      added_tokens: addedTokens,
      normalizer: null,
      pre_tokenizer: {
        type: "Sequence",
        pretokenizers: [
          { type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false },
          { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
        ],
      },
      post_processor: null,
      decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
      model: {
        type: "BPE",
        dropout: null,
        unk_token: null,
        continuing_subword_prefix: null,
        end_of_word_suffix: null,
        fuse_unk: false,
        byte_fallback: false,
        ignore_merges: false,
        vocab,
        merges: merges.map((m) => {
          const i = m.indexOf(" ", 1);
          return [m.slice(0, i), m.slice(i + 1)];
        }),
      },
    };
  } else {
    throw new GgufConvertError(`tokenizer.ggml.model ${JSON.stringify(kind)} is not imported (llama, gpt2)`);
  }
  return {
    tokenizer,
    tokenizerConfig,
    chatTemplate: typeof chatTemplate === "string" ? chatTemplate : undefined,
    bosTokenId: bos,
    eosTokenId: eos,
    padTokenId: pad,
    notes,
  };
}
