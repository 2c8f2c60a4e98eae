// The shape of an OPD repro environment, apart from the OPD table so that each setup
// (guess-number in opd-repro.ts, questworld in questworld-setup.ts) can build one without an import cycle.
import type { EpisodeLimits, EpisodeSpec, Environment, Message, Policy, Trajectory } from "@kiln/rollout";
import type { OpdEvaluation } from "../recipes/opd.js";
import type { TeacherPrompt } from "../recipes/opd-samples.js";

/** What OPD plays and how a policy is scored (questworld's Core-3, or guess-number). */
export interface OpdReproSetup {
  /** The environment's name in the tables. */
  name: string;
  makeEnv: () => Environment;
  /** Scores per held-out instance (and optionally a wall table) of a policy, greedily. */
  evaluate: (policy: Policy) => Promise<OpdEvaluation>;
  /** Seeded starts mixed into each round's rollouts (questworld's wall states). */
  starts?: (round: number) => EpisodeSpec[];
  limits?: EpisodeLimits;
  /** The teacher's scaffold: appended to the student's system prompt. */
  note: string;
  /** Whether the evaluation's success is meaningful (false: the table leaves the column out). */
  reportsSuccess?: boolean;
  /** What the student sees of a long conversation (runOpdRounds' `view`, e.g. questworld's window). */
  view?: (messages: Message[]) => Message[];
  /** Student turns teacher-scored and trained on per round (runOpdRounds' `turnsPerRound`). */
  turnsPerRound?: number;
  /** The turns the round diagnostics single out (questworld: turns at the wall), and their name. */
  focusTurn?: (trajectory: Trajectory, turn: number) => boolean;
  focusLabel?: string;
  /**
   * A privileged-information teacher (questworld: the expert planner's next call as a note): how
   * its prompt is built for a student turn from what the rollout recorded, and how it is evaluated
   * with the note computed from each episode's live state. Used when opdTeacher is "privileged" or "guided".
   */
  privileged?: {
    teacherPrompt: TeacherPrompt;
    evaluateTeacher: (teacher: Policy) => Promise<OpdEvaluation>;
  };
  /** The seed card's wall row, per phase ("0/3" …), printed beside kiln's wall counts. */
  seedWall?: { source: string; byPhase: Record<string, string>; claims: string[] };
}
