// NLTK's `WordNetLemmatizer().lemmatize(word)` (pos "n"), which codenames uses to reject clues that share a
// lemma with a board word (clembench `codenames/players.py`, `check_morphological_similarity`).
//
// NLTK 3.8 (`nltk/stem/wordnet.py`, `nltk/corpus/reader/wordnet.py` `_morphy`): the lemma is the shortest
// (first on ties) of morphy's results, or the word itself when there are none. morphy looks the word up in the
// noun exception list; otherwise it tries the word and its one-step suffix rewrites against the noun lemmas,
// and, while nothing is found, keeps rewriting. The data is WordNet 3.0 (what NLTK's `wordnet` corpus is),
// reduced to the entries the codenames check can ever consult (see data/clembench/codenames/make_wordnet_table.py).
import { readDataJson } from "../../data-dir.js";
import { ResourceError } from "../../errors.js";

/** `MORPHOLOGICAL_SUBSTITUTIONS["n"]`, in NLTK's order. */
const NOUN_RULES: readonly [string, string][] = [
  ["s", ""],
  ["ses", "s"],
  ["ves", "f"],
  ["xes", "x"],
  ["zes", "z"],
  ["ches", "ch"],
  ["shes", "sh"],
  ["men", "man"],
  ["ies", "y"],
];

export interface WordNetNounTable {
  source: string;
  /** Board words whose lemmas the table decides exactly (every board word of the shipped instance files). */
  board_words: string[];
  nouns: string[];
  exceptions: Record<string, string[]>;
}

export class WordNetLemmatizer {
  private readonly nouns: Set<string>;
  private readonly exceptions: Map<string, string[]>;
  readonly boardWords: ReadonlySet<string>;

  constructor(table: WordNetNounTable) {
    if (!Array.isArray(table?.nouns) || !table.exceptions || !Array.isArray(table.board_words))
      throw new ResourceError("WordNet noun table: expected {board_words, nouns, exceptions}");
    this.nouns = new Set(table.nouns);
    this.exceptions = new Map(Object.entries(table.exceptions));
    this.boardWords = new Set(table.board_words);
  }

  private applyRules(forms: string[]): string[] {
    const out: string[] = [];
    for (const form of forms)
      for (const [old, repl] of NOUN_RULES) if (form.endsWith(old)) out.push(form.slice(0, -old.length) + repl);
    return out;
  }

  private filterForms(forms: string[]): string[] {
    const result: string[] = [];
    for (const f of forms) if (this.nouns.has(f) && !result.includes(f)) result.push(f);
    return result;
  }

  /** `_morphy(form, "n")`. */
  morphy(form: string): string[] {
    const exc = this.exceptions.get(form);
    if (exc) return this.filterForms([form, ...exc]);
    let forms = this.applyRules([form]);
    let results = this.filterForms([form, ...forms]);
    if (results.length > 0) return results;
    while (forms.length > 0) {
      forms = this.applyRules(forms);
      results = this.filterForms(forms);
      if (results.length > 0) return results;
    }
    return [];
  }

  /** `lemmatize(word)`: the shortest morphy result (Python's `min(..., key=len)` keeps the first on ties). */
  lemmatize(word: string): string {
    const lemmas = this.morphy(word);
    if (lemmas.length === 0) return word;
    let best = lemmas[0];
    // Python len() counts code points
    const len = (s: string) => Array.from(s).length;
    for (const l of lemmas) if (len(l) < len(best)) best = l;
    return best;
  }
}

const cache = new Map<string, WordNetLemmatizer>();

/** The lemmatizer over the shipped table `codenames/wordnet-nouns.json` (loaded once per data directory). */
export function loadWordNetLemmatizer(dataDir: string): WordNetLemmatizer {
  let lem = cache.get(dataDir);
  if (!lem) {
    lem = new WordNetLemmatizer(readDataJson<WordNetNounTable>(dataDir, "codenames", "wordnet-nouns.json"));
    cache.set(dataDir, lem);
  }
  return lem;
}
