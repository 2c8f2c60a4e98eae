// Typed errors of the tau2 port. Each message names the thing and the rule it broke.

/** Bad input to the port itself: a missing data file, an unknown split, a malformed task. */
export class Tau2Error extends Error {
  override name = "Tau2Error";
}

/**
 * An exception raised inside a tool, exactly as upstream raises it. The environment turns it
 * into a tool message `Error: <message>` with `error: true` (tau2 environment.py get_response).
 */
export class ToolError extends Error {
  override name = "ToolError";
}
