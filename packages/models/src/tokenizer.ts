// tokenizer.json + tokenizer_config.json through @huggingface/tokenizers (docs/NUMERICS.md §7),
// plus the special-token facts generation and chat templates need.
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { TokenizerError } from "./errors.js";
import { type ModelSource, ggufConfigFiles, isGgufPath, modelFiles, readJsonFile } from "./model-files.js";

export interface EncodeOptions {
  /** Apply the post-processor's special tokens (e.g. Llama's BOS). Default false: chat templates add their own. */
  addSpecialTokens?: boolean;
}

export interface DecodeOptions {
  skipSpecialTokens?: boolean;
}

function tokenContent(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof (v as { content?: unknown }).content === "string")
    return (v as { content: string }).content;
  return null;
}

export class Tokenizer {
  private readonly hf: HfTokenizer;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly padToken: string | null;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | null;
  readonly padTokenId: number | null;
  /** tokenizer_config.json `chat_template` (a string, or the "default" entry of a named list). */
  readonly chatTemplate: string | null;
  /** Ids of the tokens flagged special (skipped by `decode(…, {skipSpecialTokens: true})`). */
  readonly specialIds: ReadonlySet<number>;

  constructor(
    readonly tokenizerJson: Record<string, unknown>,
    readonly tokenizerConfig: Record<string, unknown> = {},
  ) {
    checkVocabularyIds(tokenizerJson);
    try {
      this.hf = new HfTokenizer(tokenizerJson, tokenizerConfig);
    } catch (e) {
      throw new TokenizerError(`tokenizer.json: cannot build the tokenizer (${(e as Error).message})`);
    }
    const id = (tok: string | null) => (tok === null ? null : (this.hf.token_to_id(tok) ?? null));
    this.bosToken = tokenContent(tokenizerConfig.bos_token);
    this.eosToken = tokenContent(tokenizerConfig.eos_token);
    this.padToken = tokenContent(tokenizerConfig.pad_token);
    this.bosTokenId = id(this.bosToken);
    this.eosTokenId = id(this.eosToken);
    this.padTokenId = id(this.padToken);
    const tmpl = tokenizerConfig.chat_template;
    if (typeof tmpl === "string") this.chatTemplate = tmpl;
    else if (Array.isArray(tmpl)) {
      const d = (tmpl as { name?: string; template?: string }[]).find((t) => t.name === "default");
      this.chatTemplate = d?.template ?? null;
    } else this.chatTemplate = null;
    const special = new Set<number>();
    const added = (tokenizerJson.added_tokens ?? []) as { id: number; special?: boolean }[];
    for (const t of added) if (t.special) special.add(t.id);
    this.specialIds = special;
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    return this.hf.encode(text, { add_special_tokens: options.addSpecialTokens ?? false }).ids;
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    // @huggingface/tokenizers rejects an empty id list; an empty completion (EOS first) is "".
    if (ids.length === 0) return "";
    return this.hf.decode([...ids], {
      skip_special_tokens: options.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    });
  }

  tokenToId(token: string): number | null {
    return this.hf.token_to_id(token) ?? null;
  }

  idToToken(id: number): string | null {
    return this.hf.id_to_token(id) ?? null;
  }

  /** Size of the vocabulary including added tokens (may be below config vocab_size: padded rows). */
  get vocabSize(): number {
    return this.hf.get_vocab(true).size;
  }

  /**
   * The text a token adds when it follows other text (log-prob displays, streaming). Decoding it alone is not
   * that: SentencePiece decoders drop the word-start space of the first token ("▁She" reads "She", not " She").
   */
  tokenText(id: number): string {
    const anchor = this.anchorToken();
    if (anchor === null) return this.decode([id]);
    const both = this.decode([anchor.id, id]);
    return both.startsWith(anchor.text) ? both.slice(anchor.text.length) : this.decode([id]);
  }

  /**
   * The text `ids` add after `prefix` (e.g. a completion after its prompt), so that `decode(prefix) + result`
   * reads as `decode([...prefix, ...ids])`. Decoding `ids` alone loses a leading SentencePiece space and splits
   * UTF-8 sequences that straddle the boundary; when the prefix ends inside a character, the result starts with
   * that whole character. Only the last few prefix tokens are decoded again.
   */
  decodeContinuation(prefix: readonly number[], ids: readonly number[], options: DecodeOptions = {}): string {
    if (ids.length === 0) return "";
    if (prefix.length === 0) return this.decode(ids, options);
    for (const tailLength of [CONTINUATION_TAIL, prefix.length]) {
      const tail = prefix.slice(-tailLength);
      const head = this.decode(tail, options);
      const whole = this.decode([...tail, ...ids], options);
      if (whole.startsWith(head)) return whole.slice(head.length);
      // The prefix ends inside a character (byte-fallback pieces): it decoded to U+FFFD, which `ids` complete.
      const complete = head.replace(/\uFFFD+$/, "");
      if (complete !== head && whole.startsWith(complete)) return whole.slice(complete.length);
      if (tailLength >= prefix.length) break;
    }
    return this.decode(ids, options);
  }

  private anchor: { id: number; text: string } | null | undefined;

  /** An ordinary token to decode in front of another, so that token decodes as it does mid-text. */
  private anchorToken(): { id: number; text: string } | null {
    if (this.anchor !== undefined) return this.anchor;
    const [id] = this.encode("a");
    this.anchor = id === undefined || this.specialIds.has(id) ? null : { id, text: this.decode([id]) };
    if (this.anchor !== null && this.anchor.text === "") this.anchor = null;
    return this.anchor;
  }
}

/** Prefix tokens decoded again at a boundary: enough for a word-start marker or a 4-byte UTF-8 sequence. */
const CONTINUATION_TAIL = 8;

/** Load tokenizer.json (+ tokenizer_config.json and chat_template.jinja when present). */
export async function loadTokenizer(source: ModelSource): Promise<Tokenizer> {
  // A .gguf carries its vocabulary in tokenizer.ggml.* keys; they become tokenizer.json without reading the weights.
  const files = modelFiles(isGgufPath(source) ? (await ggufConfigFiles(source)).files : source);
  const json = await readJsonFile(files, "tokenizer.json");
  if (json === null) throw new TokenizerError(`${files.label}: no tokenizer.json`);
  const config = (await readJsonFile(files, "tokenizer_config.json")) ?? {};
  const jinja = await files.text("chat_template.jinja");
  // transformers ≥ 4.43 saves the template as chat_template.jinja; it wins over the config entry.
  return new Tokenizer(json, jinja === null ? config : { ...config, chat_template: jinja });
}

/**
 * Token ids in tokenizer.json must be non-negative integers: an id stored as a string ("5") would be
 * taken as is by the tokenizer library and come back as garbage ids. Unigram vocabularies are lists
 * of [piece, score] (ids are positions) and are not affected.
 */
function checkVocabularyIds(json: Record<string, unknown>): void {
  const isId = (v: unknown) => typeof v === "number" && Number.isInteger(v) && v >= 0;
  const vocab = (json.model as { vocab?: unknown } | undefined)?.vocab;
  if (vocab && typeof vocab === "object" && !Array.isArray(vocab)) {
    for (const [token, id] of Object.entries(vocab)) {
      if (!isId(id))
        throw new TokenizerError(
          `tokenizer.json: model.vocab[${JSON.stringify(token)}] must be a non-negative integer id, got ${JSON.stringify(id)}`,
        );
    }
  }
  const added = json.added_tokens;
  if (Array.isArray(added)) {
    for (const t of added as { id?: unknown; content?: unknown }[]) {
      if (!isId(t?.id))
        throw new TokenizerError(
          `tokenizer.json: added_tokens entry ${JSON.stringify(t?.content)} must have a non-negative integer id, got ${JSON.stringify(t?.id)}`,
        );
    }
  }
}
