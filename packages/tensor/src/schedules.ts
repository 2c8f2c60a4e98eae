// Learning-rate schedules as multipliers of the base lr, matching transformers'
// optimization.py (get_*_schedule_with_warmup) for step = 0, 1, … (LambdaLR semantics).

export type LrSchedule = (step: number) => number;

/** Warmup steps from a ratio, as TrainingArguments.get_warmup_steps: ceil(total · ratio). */
export function warmupSteps(totalSteps: number, warmupRatio: number): number {
  return Math.ceil(totalSteps * warmupRatio);
}

/** get_constant_schedule_with_warmup (warmup 0 = get_constant_schedule). */
export function constantSchedule(warmup = 0): LrSchedule {
  return (step) => (step < warmup ? step / Math.max(1, warmup) : 1);
}

/** get_linear_schedule_with_warmup. */
export function linearSchedule(warmup: number, totalSteps: number): LrSchedule {
  return (step) => {
    if (step < warmup) return step / Math.max(1, warmup);
    return Math.max(0, (totalSteps - step) / Math.max(1, totalSteps - warmup));
  };
}

/** get_cosine_schedule_with_warmup (num_cycles 0.5: one half-cosine down to 0). */
export function cosineSchedule(warmup: number, totalSteps: number, numCycles = 0.5): LrSchedule {
  return (step) => {
    if (step < warmup) return step / Math.max(1, warmup);
    const progress = (step - warmup) / Math.max(1, totalSteps - warmup);
    return Math.max(0, 0.5 * (1 + Math.cos(Math.PI * numCycles * 2 * progress)));
  };
}

/** Sets `optimizer.lr = baseLr · schedule(step)` on each `step()` call, like torch's LambdaLR. */
export class LrScheduler {
  private current = 0;
  constructor(
    private readonly optimizer: { lr: number },
    private readonly baseLr: number,
    private readonly schedule: LrSchedule,
  ) {
    optimizer.lr = baseLr * schedule(0);
  }

  get lastStep(): number {
    return this.current;
  }

  step(): void {
    this.current++;
    this.optimizer.lr = this.baseLr * this.schedule(this.current);
  }
}
