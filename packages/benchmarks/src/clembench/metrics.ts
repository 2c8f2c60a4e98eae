// Metric names shared by all games (clemcore `clemgame/metrics.py`). Users grep for these strings.
export const METRIC_ABORTED = "Aborted";
export const METRIC_LOSE = "Lose";
export const METRIC_SUCCESS = "Success";
export const METRIC_REQUEST_COUNT = "Request Count";
export const METRIC_REQUEST_COUNT_PARSED = "Parsed Request Count";
export const METRIC_REQUEST_COUNT_VIOLATED = "Violated Request Count";
export const METRIC_REQUEST_SUCCESS_RATIO = "Request Success Ratio";
export const BENCH_SCORE = "Main Score";
/** Derived by the evaluator as 1 − Aborted; games must not write it. */
export const METRIC_PLAYED = "Played";
