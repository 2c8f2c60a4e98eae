// The diagnosers and the turn-local pairing rule live beside the episodes in @kiln/rollout.
export {
  FAILURE_MODES,
  diagnoseTrajectory,
  diagnoseTurn,
  truncateRepair,
  turnLocalPairs,
  type DiagnoseOptions,
  type DiagnosedTurn,
  type FailureMode,
  type RepairFn,
  type TurnPair,
  type TurnPairOptions,
  type TurnPairResult,
} from "@kiln/rollout";
