// Post-training in a browser tab: load stories260K from the served Hugging Face files, generate, train a
// LoRA adapter with AdamW on a short text while drawing the loss, generate again.
import { attachLora } from "@kiln/lora";
import { generateAsync, loadModel, loadTokenizer } from "@kiln/models";
import * as T from "@kiln/tensor";

const $ = (id) => document.getElementById(id);
const ui = {
  backend: $("backend"),
  steps: $("steps"),
  lr: $("lr"),
  rank: $("rank"),
  prompt: $("prompt"),
  text: $("text"),
  start: $("start"),
  status: $("status"),
  before: $("before"),
  after: $("after"),
  curve: $("curve"),
};

/** What the page did, for people (the status line) and for the example's browser test. */
const state = {
  phase: "loading",
  backend: null,
  losses: [],
  before: "",
  after: "",
  msPerStep: null,
  tokensPerStep: null,
  error: null,
};
globalThis.kilnExample = state;

function setStatus(text, phase) {
  ui.status.textContent = text;
  if (phase) {
    state.phase = phase;
    document.body.dataset.phase = phase;
  }
}

/** Host value of a scalar tensor on any backend (WebGPU reads are asynchronous). */
async function scalarOf(t) {
  if (typeof t.data === "function") return (await t.data())[0];
  return t.item();
}

async function fetchModelFiles() {
  const names = await (await fetch("./model/files.json")).json();
  const files = new Map();
  await Promise.all(
    names.map(async (name) => {
      const response = await fetch(`./model/${name}`);
      if (!response.ok) throw new Error(`GET model/${name}: HTTP ${response.status}`);
      files.set(name, name.endsWith(".json") ? await response.text() : new Uint8Array(await response.arrayBuffer()));
    }),
  );
  return files;
}

async function availableBackends() {
  const options = [];
  // Worker threads share one WebAssembly.Memory, which needs a cross-origin isolated page.
  options.push({
    value: "wasm",
    label: `wasm (SIMD, ${globalThis.crossOriginIsolated ? 2 : 1} thread${globalThis.crossOriginIsolated ? "s" : ""})`,
  });
  if (navigator.gpu) {
    const adapter = await navigator.gpu.requestAdapter().catch(() => null);
    const name = adapter?.info?.description || adapter?.info?.architecture || adapter?.info?.vendor || "adapter";
    // Start it now (without activating it) so the menu only offers what works here.
    const failure = adapter
      ? await T.initBackend("webgpu", { activate: false }).then(
          () => null,
          (err) => String(err?.message ?? err),
        )
      : "no WebGPU adapter";
    options.push({
      value: "webgpu",
      label: failure ? `webgpu: unavailable (${failure})` : `webgpu (${name})`,
      disabled: Boolean(failure),
    });
  } else {
    options.push({ value: "webgpu", label: "webgpu: this browser has no navigator.gpu", disabled: true });
  }
  options.push({ value: "js", label: "js (reference)" });
  return options;
}

async function useBackend(name) {
  await T.initBackend(name, name === "wasm" ? { threads: globalThis.crossOriginIsolated ? 2 : 1 } : {});
  state.backend = name;
}

/** Next-token training windows over the tokenised text: inputs [batch, seq] and targets [batch·seq]. */
function batchOf(ids, batch, seq) {
  const inputs = new Int32Array(batch * seq);
  const targets = new Int32Array(batch * seq);
  const stride = Math.max(1, Math.floor((ids.length - seq - 1) / Math.max(1, batch - 1)));
  for (let b = 0; b < batch; b++) {
    const start = Math.min(b * stride, ids.length - seq - 1);
    for (let t = 0; t < seq; t++) {
      inputs[b * seq + t] = ids[start + t];
      targets[b * seq + t] = ids[start + t + 1];
    }
  }
  return { x: new T.Tensor(inputs, [batch, seq], "i32"), y: new T.Tensor(targets, [batch * seq], "i32") };
}

async function greedy(model, tokenizer, prompt) {
  // generateAsync awaits each step's logits: WebGPU memory cannot be read synchronously.
  const [out] = await generateAsync(model, [tokenizer.encode(prompt)], { maxNewTokens: 48, greedy: true, tokenizer });
  return out.text;
}

function showGeneration(element, prompt, completion) {
  element.replaceChildren();
  const b = document.createElement("b");
  b.textContent = prompt;
  element.append(b, completion);
}

function drawCurve(losses, total) {
  const canvas = ui.curve;
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  const pad = { left: 46, right: 14, top: 12, bottom: 26 };
  ctx.clearRect(0, 0, width, height);
  ctx.font = "12px system-ui, sans-serif";
  ctx.fillStyle = "#5a6372";
  ctx.strokeStyle = "#e5e0d6";
  const top = Math.max(1e-6, ...losses) * 1.08;
  const x = (i) => pad.left + (i / Math.max(1, total - 1)) * (width - pad.left - pad.right);
  const y = (v) => pad.top + (1 - v / top) * (height - pad.top - pad.bottom);
  for (let k = 0; k <= 4; k++) {
    const v = (top * k) / 4;
    ctx.beginPath();
    ctx.moveTo(pad.left, y(v));
    ctx.lineTo(width - pad.right, y(v));
    ctx.stroke();
    ctx.fillText(v.toFixed(2), 6, y(v) + 4);
  }
  ctx.fillText("step", pad.left + (width - pad.left - pad.right) / 2 - 12, height - 8);
  for (const step of [0, total - 1]) ctx.fillText(String(step + 1), x(step) - 4, height - 8);
  if (losses.length === 0) return;
  ctx.strokeStyle = "#c2410c";
  ctx.lineWidth = 2.5;
  ctx.beginPath();
  for (const [i, v] of losses.entries()) {
    if (i === 0) ctx.moveTo(x(i), y(v));
    else ctx.lineTo(x(i), y(v));
  }
  ctx.stroke();
  ctx.fillStyle = "#c2410c";
  for (const [i, v] of losses.entries()) {
    ctx.beginPath();
    ctx.arc(x(i), y(v), 3, 0, 2 * Math.PI);
    ctx.fill();
  }
  ctx.lineWidth = 1;
}

/** Lets the browser paint (status, curve) between training steps. */
const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));

async function run(files) {
  const steps = Math.max(1, Math.min(500, Number(ui.steps.value) || 40));
  const lr = Number(ui.lr.value) || 2e-3;
  const rank = Math.max(1, Math.min(64, Number(ui.rank.value) || 8));
  const prompt = ui.prompt.value;
  ui.start.disabled = true;
  state.losses = [];
  state.after = "";
  ui.after.textContent = "";
  drawCurve([], steps);
  setStatus(`starting ${ui.backend.value}…`, "starting");
  await useBackend(ui.backend.value);
  // A fresh base model for every run, its weights on the chosen backend.
  const model = await loadModel(files);
  const tokenizer = await loadTokenizer(files);

  state.before = await greedy(model, tokenizer, prompt);
  showGeneration(ui.before, prompt, state.before);

  const ids = tokenizer.encode(`${ui.text.value.trim()} `.repeat(3));
  const seq = Math.min(64, ids.length - 2);
  const { x, y } = batchOf(ids, 4, seq);
  const adapter = attachLora(model, { r: rank, alpha: 2 * rank, dropout: 0, targetModules: "all-linear", seed: 0 });
  const optimizer = new T.AdamW(adapter.parameters(), { lr, weightDecay: 0 });
  const tokensPerStep = x.shape[0] * x.shape[1];
  state.tokensPerStep = tokensPerStep;
  let trainingMs = 0;
  for (let step = 0; step < steps; step++) {
    const t0 = performance.now();
    optimizer.zeroGrad();
    const logits = model.forward(x);
    const loss = T.crossEntropy(T.reshape(logits, [tokensPerStep, -1]), y);
    T.backward(loss);
    optimizer.step();
    const value = await scalarOf(loss);
    trainingMs += performance.now() - t0;
    state.losses.push(value);
    state.msPerStep = trainingMs / (step + 1);
    drawCurve(state.losses, steps);
    setStatus(
      `${state.backend}: step ${step + 1}/${steps}, loss ${value.toFixed(4)}, ${state.msPerStep.toFixed(0)} ms/step (${((1000 * tokensPerStep) / state.msPerStep).toFixed(0)} tokens/s)`,
      "training",
    );
    await nextFrame();
  }
  state.after = await greedy(model, tokenizer, prompt);
  showGeneration(ui.after, prompt, state.after);
  setStatus(
    `${state.backend}: ${steps} steps, loss ${state.losses[0].toFixed(3)} → ${state.losses.at(-1).toFixed(3)}, ${state.msPerStep.toFixed(0)} ms/step, adapter ${adapter
      .parameters()
      .reduce((n, p) => n + p.size, 0)
      .toLocaleString()} parameters`,
    "done",
  );
  ui.start.disabled = false;
}

async function main() {
  const files = await fetchModelFiles();
  for (const { value, label, disabled } of await availableBackends()) {
    const option = new Option(label.length > 90 ? `${label.slice(0, 87)}…` : label, value);
    option.disabled = Boolean(disabled);
    ui.backend.add(option);
  }
  ui.start.textContent = "start fine-tuning";
  ui.start.disabled = false;
  drawCurve([], Number(ui.steps.value) || 40);
  setStatus("ready: stories260K loaded from ./model/ (Hugging Face files)", "ready");
  ui.start.addEventListener("click", () =>
    run(files).catch((err) => {
      state.error = String(err?.stack ?? err);
      setStatus(`failed: ${err?.message ?? err}`, "error");
      ui.start.disabled = false;
    }),
  );
}

main().catch((err) => {
  state.error = String(err?.stack ?? err);
  setStatus(`failed: ${err?.message ?? err}`, "error");
});
