// A training step is synchronous (a second or more on CPU); awaiting this between steps lets the event loop
// turn, so signal handlers (Ctrl-C) and timers run after the step in flight instead of when training ends.
// setImmediate where there is one (Node), a zero timeout in browsers.
export const yieldToEventLoop: () => Promise<void> =
  typeof setImmediate === "function"
    ? () => new Promise((resolve) => setImmediate(resolve))
    : () => new Promise((resolve) => setTimeout(resolve, 0));
