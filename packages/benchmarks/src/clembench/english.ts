// English stop words and stemming for taboo, matching NLTK's tools that clembench uses.
import nlpEn from "@nlpjs/lang-en-min";

/**
 * NLTK's English stop word list (`nltk.corpus.stopwords.words("english")`): the classic 179 words plus the
 * contractions later added to nltk_data. taboo removes ASCII punctuation before filtering, so entries with an
 * apostrophe can never match; both list versions therefore filter identically.
 */
export const NLTK_ENGLISH_STOPWORDS: ReadonlySet<string> = new Set(
  (
    "i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his " +
    "himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom " +
    "this that that'll these those am is are was were be been being have has had having do does did doing a an the " +
    "and but if or because as until while of at by for with about against between into through during before after " +
    "above below to from up down in out on off over under again further then once here there when where why how all " +
    "any both each few more most other some such no nor not only own same so than too very s t can will just don " +
    "don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn " +
    "hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn " +
    "shouldn't wasn wasn't weren weren't won won't wouldn wouldn't " +
    "he'd he'll he's i'd i'll i'm i've it'd it'll she'd she'll they'd they'll they're they've we'd we'll we're we've"
  ).split(" "),
);

let stemmer: { stemWord(w: string): string } | null = null;

/**
 * Snowball (Porter2) English stem, as `nltk.stem.snowball.SnowballStemmer("english").stem`. NLTK lowercases
 * the word first; @nlpjs's generated Snowball stemmer does not, so we do. Checked against NLTK 3.10 on
 * ~20k words (test/clembench/fixtures/nltk-stems.json).
 */
export function snowballStem(word: string): string {
  if (!stemmer) stemmer = new nlpEn.StemmerEn();
  return stemmer.stemWord(word.toLowerCase());
}
