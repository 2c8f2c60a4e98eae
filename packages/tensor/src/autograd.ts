// Reverse-mode autograd, micrograd style: every op output remembers a GradNode
// (its inputs and a backward closure); `backward` walks the tape in reverse
// topological order and sums gradients. Gradients are defined once per op in
// terms of other ops, so every backend inherits them.
import { activeStorage, kernel } from "./backend.js";
import { AutogradError, ShapeError, fmtShape } from "./errors.js";
import { sameShape } from "./shape.js";
import type { Storage } from "./storage.js";
import { type GradNode, Tensor, argOf, markLeafGrad } from "./tensor.js";

let gradEnabled = true;

export function isGradEnabled(): boolean {
  return gradEnabled;
}

/** Run `fn` without recording a tape (inference, optimizer steps, reference models). */
export function noGrad<T>(fn: () => T): T {
  const previous = gradEnabled;
  gradEnabled = false;
  try {
    return fn();
  } finally {
    gradEnabled = previous;
  }
}

export function withGrad<T>(fn: () => T): T {
  const previous = gradEnabled;
  gradEnabled = true;
  try {
    return fn();
  } finally {
    gradEnabled = previous;
  }
}

/**
 * Attach a tape node to `out` when recording and any input requires grad. `saved` lists tensors the backward
 * closure reads besides the inputs and `out` (so `tidy` keeps them while the tape needs them); `temporaries`
 * are tensors the op made only for its backward, disposed as soon as that backward ran (without retainGraph).
 */
export function record(
  out: Tensor,
  op: string,
  inputs: readonly Tensor[],
  backward: (gradOutput: Tensor) => (Tensor | null)[],
  saved?: readonly Tensor[],
  temporaries?: readonly Tensor[],
): Tensor {
  if (!gradEnabled) return out;
  let needs = false;
  for (const t of inputs) if (t.requiresGrad) needs = true;
  if (!needs) return out;
  out.requiresGrad = true;
  out.node = { op, inputs, backward, saved, temporaries } satisfies GradNode;
  return out;
}

function topoOrder(root: Tensor): Tensor[] {
  const order: Tensor[] = [];
  const visited = new Set<Tensor>();
  // Iterative DFS: deep models would overflow a recursive walk.
  const stack: [Tensor, number][] = [[root, 0]];
  visited.add(root);
  while (stack.length > 0) {
    const top = stack[stack.length - 1];
    const [t, i] = top;
    const inputs = t.node?.inputs ?? [];
    if (i < inputs.length) {
      top[1] = i + 1;
      const child = inputs[i];
      if (child.requiresGrad && !visited.has(child)) {
        visited.add(child);
        stack.push([child, 0]);
      }
    } else {
      stack.pop();
      order.push(t);
    }
  }
  return order;
}

function accumulateInto(target: Tensor, grad: Tensor, owned: Set<Storage>): void {
  if (!sameShape(target.shape, grad.shape)) {
    throw new ShapeError(`backward: gradient ${fmtShape(grad.shape)} does not match tensor ${fmtShape(target.shape)}`);
  }
  if (target.grad === null) {
    // Take the gradient's storage over instead of copying (a [tokens × vocab] logits gradient is
    // large) unless another leaf or the caller's seed already holds that storage: leaf gradients
    // are later changed in place (accumulation, clipping), so no two may share storage.
    if (grad.dtype === "f32" && !owned.has(grad.storage)) {
      owned.add(grad.storage);
      target.grad = new Tensor(grad.storage, target.shape, "f32", grad.offset);
    } else {
      target.grad = grad.clone();
    }
    markLeafGrad(target.grad);
    return;
  }
  const n = grad.size;
  kernel("binary")(
    "add",
    argOf(target.grad) as Float32Array,
    argOf(grad) as Float32Array,
    argOf(target.grad) as Float32Array,
    {
      shape: [n],
      aStrides: [1],
      bStrides: [1],
    },
  );
}

export interface BackwardOptions {
  /** Keep the tape so backward can run again through the same graph. */
  retainGraph?: boolean;
}

/**
 * Backpropagate from `root` (a scalar unless `gradient` is given). Leaf tensors that
 * require grad accumulate into `.grad` (call `zeroGrad` between steps); intermediate
 * gradients are dropped as soon as they are used.
 */
export function backward(root: Tensor, gradient?: Tensor, options: BackwardOptions = {}): void {
  if (!root.requiresGrad)
    throw new AutogradError("backward: tensor does not require grad (no trainable input reaches it)");
  if (gradient === undefined && root.size !== 1) {
    throw new AutogradError(`backward: implicit gradient only for scalars, got shape ${fmtShape(root.shape)}`);
  }
  const seed = gradient ?? ones(root.shape);
  backwardMany([root], [seed], options);
  if (!gradient && !options.retainGraph) seed.dispose();
}

/** Backpropagate several outputs with their gradients at once (used by checkpointing). */
export function backwardMany(roots: Tensor[], gradients: Tensor[], options: BackwardOptions = {}): void {
  const pending = new Map<Tensor, Tensor>();
  // Buffers a leaf gradient may not take over: the caller's seeds, then every buffer already taken.
  const owned = new Set<Storage>(gradients.map((g) => g.storage));
  // Intermediate gradients are disposed as soon as nothing pending refers to them (the same object may be
  // pending for several inputs, e.g. both sides of an add), so a training step reuses their memory at once
  // instead of waiting for the garbage collector. Seeds belong to the caller and are never disposed; with
  // retainGraph a backward closure may hand out a tensor it keeps for the next pass, so nothing is.
  const eager = !options.retainGraph;
  const seeds = new Set<Tensor>(gradients);
  const uses = new Map<Tensor, number>();
  const hold = (g: Tensor) => uses.set(g, (uses.get(g) ?? 0) + 1);
  const drop = (g: Tensor) => {
    const n = (uses.get(g) ?? 1) - 1;
    if (n > 0) uses.set(g, n);
    else {
      uses.delete(g);
      if (eager && !seeds.has(g)) g.dispose();
    }
  };
  // A pending gradient only the tape refers to (one pending use, the only tensor on backend-owned storage of
  // the active backend, not a seed) takes the next contribution in place instead of a fresh sum. The values
  // are the same: prev + g either way.
  const exclusive = (p: Tensor) =>
    eager &&
    p.dtype === "f32" &&
    uses.get(p) === 1 &&
    !seeds.has(p) &&
    p.storage.refs === 1 &&
    p.storage.owned &&
    p.storage.backend === activeStorage();
  const push = (target: Tensor, g: Tensor) => {
    const prev = pending.get(target);
    hold(g);
    if (!prev) {
      pending.set(target, g);
      return;
    }
    if (prev !== g && exclusive(prev)) {
      addInPlace(prev, g);
      drop(g);
      return;
    }
    const sum = addGrads(prev, g);
    hold(sum);
    pending.set(target, sum);
    drop(prev);
    drop(g);
  };
  const order: Tensor[] = [];
  const seen = new Set<Tensor>();
  for (let r = 0; r < roots.length; r++) {
    const root = roots[r];
    if (!root.requiresGrad) continue;
    push(root, gradients[r]);
    for (const t of topoOrder(root)) {
      if (!seen.has(t)) {
        seen.add(t);
        order.push(t);
      }
    }
  }
  // Concatenated post-orders stay topological: a node first reached from a later root
  // cannot be an input of a node already placed from an earlier root.
  const fullOrder = order;
  const previous = gradEnabled;
  gradEnabled = false;
  try {
    for (let i = fullOrder.length - 1; i >= 0; i--) {
      const t = fullOrder[i];
      const g = pending.get(t);
      if (g === undefined) continue;
      pending.delete(t);
      if (t.node === null) {
        accumulateInto(t, g, owned);
        drop(g);
        continue;
      }
      const grads = t.node.backward(g);
      const inputs = t.node.inputs;
      for (let k = 0; k < inputs.length; k++) {
        const input = inputs[k];
        const gi = grads[k];
        if (!input.requiresGrad || gi === null || gi === undefined) continue;
        if (!sameShape(gi.shape, input.shape)) {
          throw new ShapeError(
            `backward of ${t.node.op}: gradient ${fmtShape(gi.shape)} for input ${k} of shape ${fmtShape(input.shape)}`,
          );
        }
        push(input, gi);
      }
      drop(g);
      if (!options.retainGraph) {
        if (t.node.temporaries) for (const tmp of t.node.temporaries) tmp.dispose();
        t.node = null;
      }
    }
  } finally {
    gradEnabled = previous;
  }
}

/** a += b (same shape, contiguous f32). */
function addInPlace(a: Tensor, b: Tensor): void {
  const x = argOf(a) as Float32Array;
  kernel("binary")("add", x, argOf(b) as Float32Array, x, { shape: [a.size], aStrides: [1], bStrides: [1] });
}

function addGrads(a: Tensor, b: Tensor): Tensor {
  const out = Tensor.empty(a.shape);
  kernel("binary")("add", argOf(a) as Float32Array, argOf(b) as Float32Array, argOf(out) as Float32Array, {
    shape: [a.size],
    aStrides: [1],
    bStrides: [1],
  });
  return out;
}

function ones(shape: readonly number[]): Tensor {
  const t = Tensor.output(shape);
  kernel("fill")(argOf(t) as Float32Array, t.size, 1, 0, "f32");
  return t;
}

/** Clear `.grad` on each tensor (call between optimizer steps). */
export function zeroGrad(params: Iterable<Tensor>): void {
  for (const p of params) p.grad = null;
}
