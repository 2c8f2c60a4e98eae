// Keeps codenames episodes in benchmark order around the shared `random` state. The reference draws the mock
// opponent's words from one generator seeded at benchmark start while it plays the instances one after the
// other, so episode k's draws depend on every episode before it. With the runner's concurrency, episodes would
// interleave their draws by timing; the sequencer makes each codenames episode wait until the ones created
// before it have finished (other games still run concurrently), so the draws match a sequential run.

export class EpisodeSequencer {
  private issued = 0;
  /** Every ticket below this one is finished. */
  private lowestOpen = 0;
  private readonly finished = new Set<number>();
  private waiters: { ticket: number; resolve: () => void }[] = [];

  /** A ticket in creation order (the runner creates game masters in episode order). */
  take(): number {
    return this.issued++;
  }

  /** Resolves once every earlier ticket is finished. */
  waitTurn(ticket: number): Promise<void> {
    if (ticket <= this.lowestOpen) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ ticket, resolve }));
  }

  /** Mark a ticket finished (idempotent) and wake the episode whose turn it now is. */
  finish(ticket: number): void {
    if (ticket < this.lowestOpen) return;
    this.finished.add(ticket);
    while (this.finished.has(this.lowestOpen)) this.finished.delete(this.lowestOpen++);
    const ready = this.waiters.filter((w) => w.ticket <= this.lowestOpen);
    this.waiters = this.waiters.filter((w) => w.ticket > this.lowestOpen);
    for (const w of ready) w.resolve();
  }

  /** Start a new benchmark run: ticket numbering restarts and nothing waits any more. */
  reset(): void {
    const waiting = this.waiters;
    this.waiters = [];
    this.issued = 0;
    this.lowestOpen = 0;
    this.finished.clear();
    for (const w of waiting) w.resolve();
  }
}
