// The notes that condition the embedded agent model. Expert transcripts in its training corpus carry
// them (appended to the system prompt with withSystemNote) part of the time, so a teacher that adds
// the note — OPD's scaffold, OEL's memory — plays like the expert, and the student without it does not.

/** OEL's memory for guess-number: the lesson an experienced player would write down. */
export const GUESS_NUMBER_LESSON = "Lesson from earlier games: guess the middle of the numbers still possible.";
