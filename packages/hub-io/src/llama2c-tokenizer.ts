// llama2.c tokenizer (.bin) → a Hugging Face Llama tokenizer.json (SentencePiece BPE with byte
// fallback), plus run.c's own encoder as the reference the HF tokenizer is tested against.
// Format: llama2.c `run.c` build_tokenizer / encode; layout in test/fixtures/stories260K/SOURCES.md.

import { Llama2cError } from "./errors.js";

export interface Llama2cPiece {
  /** The piece as stored, decoded as UTF-8 (spaces are real spaces, BOS is "\n<s>\n"). */
  text: string;
  score: number;
}

export interface Llama2cTokenizer {
  maxTokenLength: number;
  pieces: Llama2cPiece[];
}

/** Parse tokenizer.bin; the token count is not stored, so it comes from the model header. */
export function parseLlama2cTokenizer(bytes: Uint8Array, vocabSize: number): Llama2cTokenizer {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dec = new TextDecoder("utf-8", { fatal: true });
  const need = (off: number, n: number, what: string) => {
    if (off + n > bytes.byteLength) {
      throw new Llama2cError(`tokenizer ends at byte ${bytes.byteLength} while reading ${what} (need ${off + n})`);
    }
  };
  need(0, 4, "max_token_length");
  const maxTokenLength = dv.getInt32(0, true);
  let off = 4;
  const pieces: Llama2cPiece[] = [];
  for (let id = 0; id < vocabSize; id++) {
    need(off, 8, `token ${id} header`);
    const score = dv.getFloat32(off, true);
    const len = dv.getInt32(off + 4, true);
    off += 8;
    if (len < 0 || len > maxTokenLength * 4 + 16) throw new Llama2cError(`tokenizer token ${id} has length ${len}`);
    need(off, len, `token ${id} bytes`);
    let text: string;
    try {
      text = dec.decode(bytes.subarray(off, off + len));
    } catch {
      throw new Llama2cError(`tokenizer token ${id} is not valid UTF-8`);
    }
    off += len;
    pieces.push({ text, score });
  }
  if (off !== bytes.byteLength) {
    throw new Llama2cError(
      `tokenizer has ${bytes.byteLength - off} bytes left after ${vocabSize} tokens (wrong vocab size?)`,
    );
  }
  return { maxTokenLength, pieces };
}

const BYTE_PIECE = /^<0x[0-9A-F]{2}>$/;
const SP_SPACE = "\u2581";

type PieceKind = "unknown" | "control" | "byte" | "normal";

/** SentencePiece piece text and type for each llama2.c piece (U+2581 for spaces, plain <s>/</s>). */
export function sentencePieces(tok: Llama2cTokenizer): { piece: string; score: number; kind: PieceKind }[] {
  return tok.pieces.map((p, id) => {
    const trimmed = p.text.trim();
    if (id === 0 && p.text === "<unk>") return { piece: "<unk>", score: p.score, kind: "unknown" };
    if (trimmed === "<s>" || trimmed === "</s>") return { piece: trimmed, score: p.score, kind: "control" };
    if (BYTE_PIECE.test(p.text)) return { piece: p.text, score: p.score, kind: "byte" };
    return { piece: p.text.replaceAll(" ", SP_SPACE), score: p.score, kind: "normal" };
  });
}

/**
 * BPE merges equivalent to SentencePiece's score-ordered merging, derived the way transformers'
 * SentencePieceExtractor does: every split of a piece into two in-vocab pieces is a merge, ranked by
 * the merged piece's score (higher first), ties by the ids of the two halves.
 */
export function sentencePieceMerges(pieces: { piece: string; score: number; kind: PieceKind }[]): [string, string][] {
  const id = new Map<string, number>();
  pieces.forEach((p, i) => {
    if (!id.has(p.piece)) id.set(p.piece, i);
  });
  const merges: { l: string; r: string; score: number; li: number; ri: number; pi: number }[] = [];
  pieces.forEach((p, pi) => {
    if (p.kind !== "normal") return;
    const chars = [...p.piece];
    for (let k = 1; k < chars.length; k++) {
      const l = chars.slice(0, k).join("");
      const r = chars.slice(k).join("");
      const li = id.get(l);
      const ri = id.get(r);
      if (li !== undefined && ri !== undefined) merges.push({ l, r, score: p.score, li, ri, pi });
    }
  });
  merges.sort((a, b) => b.score - a.score || a.pi - b.pi || a.li - b.li || a.ri - b.ri);
  return merges.map((m) => [m.l, m.r]);
}

export interface Llama2cTokenizerOptions {
  /**
   * SentencePiece's `remove_extra_whitespaces` (its default, and set in llama2.c's tok512.model): drop
   * leading and trailing spaces and collapse runs of spaces (only U+0020; tabs and newlines stay).
   * Meta's Llama 2 tokenizer has it off. Default true.
   */
  removeExtraWhitespaces?: boolean;
}

/** A Llama (SentencePiece BPE, byte fallback, legacy normalizer) tokenizer.json object. */
export function llama2cTokenizerJson(
  tok: Llama2cTokenizer,
  opts: Llama2cTokenizerOptions = {},
): Record<string, unknown> {
  const pieces = sentencePieces(tok);
  const vocab: Record<string, number> = {};
  pieces.forEach((p, i) => {
    if (!(p.piece in vocab)) vocab[p.piece] = i;
  });
  const special = pieces
    .map((p, i) => ({ p, i }))
    .filter(({ p }) => p.kind === "unknown" || p.kind === "control")
    .map(({ p, i }) => ({
      id: i,
      content: p.piece,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    }));
  const bos = pieces.findIndex((p) => p.piece === "<s>");
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: special,
    // Legacy Llama normalizer: prepend "▁" (SentencePiece's dummy prefix), spaces → "▁". The
    // whitespace rules use look-arounds rather than ^/$ because Oniguruma (Rust tokenizers) reads
    // ^/$ as line anchors while JavaScript reads them as string anchors.
    normalizer: {
      type: "Sequence",
      normalizers: [
        ...((opts.removeExtraWhitespaces ?? true)
          ? [
              { type: "Replace", pattern: { Regex: "(?<![\\s\\S]) +| +(?![\\s\\S])" }, content: "" },
              { type: "Replace", pattern: { Regex: " {2,}" }, content: " " },
            ]
          : []),
        { type: "Prepend", prepend: SP_SPACE },
        { type: "Replace", pattern: { String: " " }, content: SP_SPACE },
      ],
    },
    pre_tokenizer: null,
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [
        { SpecialToken: { id: "<s>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "<s>", type_id: 1 } },
        { Sequence: { id: "B", type_id: 1 } },
      ],
      special_tokens: { "<s>": { id: "<s>", ids: [bos], tokens: ["<s>"] } },
    },
    decoder: {
      type: "Sequence",
      decoders: [
        { type: "Replace", pattern: { String: SP_SPACE }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
        { type: "Strip", content: " ", start: 1, stop: 0 },
      ],
    },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: "<unk>",
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      ignore_merges: false,
      vocab,
      merges: sentencePieceMerges(pieces),
    },
  };
}

/** tokenizer_config.json for the converted tokenizer (LlamaTokenizerFast, BOS added, no EOS). */
export function llama2cTokenizerConfig(modelMaxLength: number): Record<string, unknown> {
  return {
    add_bos_token: true,
    add_eos_token: false,
    bos_token: "<s>",
    eos_token: "</s>",
    unk_token: "<unk>",
    pad_token: null,
    clean_up_tokenization_spaces: false,
    legacy: true,
    model_max_length: modelMaxLength,
    tokenizer_class: "LlamaTokenizer",
  };
}

export const LLAMA2C_SPECIAL_TOKENS_MAP = { bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>" };

/**
 * run.c's encoder: optional BOS, the dummy-prefix " " piece, code points (or byte fallback ids
 * byte+3), then repeatedly merge the adjacent pair with the best-scoring concatenation (leftmost wins).
 */
export function llama2cEncode(
  tok: Llama2cTokenizer,
  text: string,
  opts: { bos?: boolean; eos?: boolean } = {},
): number[] {
  const lookup = new Map<string, number>();
  tok.pieces.forEach((p, i) => {
    if (!lookup.has(p.text)) lookup.set(p.text, i);
  });
  const ids: number[] = [];
  if (opts.bos ?? true) ids.push(1);
  if (text.length > 0) {
    const space = lookup.get(" ");
    if (space === undefined) throw new Llama2cError('tokenizer has no " " piece for the dummy prefix');
    ids.push(space);
  }
  const enc = new TextEncoder();
  for (const ch of text) {
    const id = lookup.get(ch);
    if (id !== undefined) ids.push(id);
    else for (const b of enc.encode(ch)) ids.push(b + 3);
  }
  const start = (opts.bos ?? true) ? 1 : 0;
  for (;;) {
    let best = Number.NEGATIVE_INFINITY;
    let bestId = -1;
    let bestIdx = -1;
    for (let i = start; i < ids.length - 1; i++) {
      const id = lookup.get(tok.pieces[ids[i]].text + tok.pieces[ids[i + 1]].text);
      if (id !== undefined && tok.pieces[id].score > best) {
        best = tok.pieces[id].score;
        bestId = id;
        bestIdx = i;
      }
    }
    if (bestIdx < 0) break;
    ids.splice(bestIdx, 2, bestId);
  }
  if (opts.eos) ids.push(2);
  return ids;
}
