// Admission of requests to the policy: at most `maxConcurrency` run at once, at most `maxQueue`
// wait (beyond that: 429), each for at most `maxQueueWaitMs` (beyond that: 503); a waiter whose
// client leaves gives up its place.
import { HttpError } from "./http.js";

export interface AdmissionStats {
  active: number;
  queued: number;
  served: number;
  rejected: number;
}

export class Admission {
  private active = 0;
  private served = 0;
  private rejected = 0;
  private readonly waiting: { grant: () => void; fail: (e: Error) => void }[] = [];

  constructor(
    private readonly maxConcurrency: number,
    private readonly maxQueue: number,
    private readonly maxQueueWaitMs: number,
  ) {}

  async acquire(signal: AbortSignal): Promise<void> {
    if (this.active < this.maxConcurrency) {
      this.active++;
      return;
    }
    if (this.waiting.length >= this.maxQueue) {
      this.rejected++;
      throw new HttpError(
        429,
        `server busy: ${this.active} requests running and ${this.waiting.length} queued`,
        "rate_limit_error",
      );
    }
    await new Promise<void>((resolve, reject) => {
      const entry = {
        grant: () => {
          cleanup();
          resolve();
        },
        fail: (e: Error) => {
          cleanup();
          reject(e);
        },
      };
      const leave = (e: Error) => {
        const i = this.waiting.indexOf(entry);
        if (i >= 0) this.waiting.splice(i, 1);
        entry.fail(e);
      };
      const timer = setTimeout(() => {
        this.rejected++;
        leave(new HttpError(503, `no slot became free within ${this.maxQueueWaitMs} ms`, "server_error"));
      }, this.maxQueueWaitMs);
      const onAbort = () => leave(new HttpError(499, "client closed the request while it was queued"));
      const cleanup = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
      };
      signal.addEventListener("abort", onAbort);
      this.waiting.push(entry);
    });
  }

  /** A finished request hands its slot straight to the next waiter (active stays the same). */
  release(): void {
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.active--;
  }

  /** Counts a request answered in full. */
  recordServed(): void {
    this.served++;
  }

  stats(): AdmissionStats {
    return { active: this.active, queued: this.waiting.length, served: this.served, rejected: this.rejected };
  }
}
