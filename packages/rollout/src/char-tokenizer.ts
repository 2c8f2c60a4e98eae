// A one-token-per-code-point tokenizer. Real models bring their own (@kiln/models); this one
// gives toy policies and tests honest token ids and text offsets without any vocabulary file.
// It is not @kiln/models' `charTokenizer`: there the ids index a fixed vocabulary (ChatML specials
// first, then printable ASCII) that a model's embedding table is sized by; here an id is the code point.

export interface TextTokenizer {
  encode(text: string): number[];
  decode(ids: number[]): string;
  /** Text of one token (for log-prob displays). */
  tokenText(id: number): string;
}

export class CharTokenizer implements TextTokenizer {
  encode(text: string): number[] {
    const out: number[] = [];
    for (const ch of text) out.push(ch.codePointAt(0)!);
    return out;
  }

  decode(ids: number[]): string {
    return ids.map((id) => String.fromCodePoint(id)).join("");
  }

  tokenText(id: number): string {
    return String.fromCodePoint(id);
  }
}
