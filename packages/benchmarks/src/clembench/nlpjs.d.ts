declare module "@nlpjs/lang-en-min" {
  interface StemmerEnInstance {
    stemWord(word: string): string;
  }
  const mod: { StemmerEn: new () => StemmerEnInstance };
  export default mod;
}
