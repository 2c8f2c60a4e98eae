// System packages that some test suites need and npm cannot provide: a Vulkan driver for the
// WebGPU suite (Mesa's lavapipe runs WebGPU on the CPU), Chromium for the browser suite and a
// CBLAS library for the native backend. Where the setup runs as root on Debian with apt (a fresh
// machine, CI) it installs what is missing; elsewhere it prints what is missing and how to add it.
// Each suite that could be run is marked `required` through an environment variable, so the suite
// fails (instead of reporting "not run") if its dependency then turns out not to work.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const BACKPORTS_LIST = "/etc/apt/sources.list.d/kiln-bookworm-backports.list";

/** @typedef {{ suite: string, env: string, why: string, probe: () => string | null, cpu?: () => string | null, apt: string[], backports?: boolean, manual: string }} SystemDep */

function sh(cmd, args, options = {}) {
  return spawnSync(cmd, args, { encoding: "utf8", timeout: 60_000, ...options });
}

function debianCodename() {
  if (!existsSync("/etc/os-release")) return null;
  const text = readFileSync("/etc/os-release", "utf8");
  return /^VERSION_CODENAME=(\w+)/m.exec(text)?.[1] ?? null;
}

/** The WebGPU adapter Dawn finds (through the `webgpu` package), or null with the reason. */
function probeWebgpu(root) {
  const script = `
    const { create, globals } = require("webgpu");
    Object.assign(globalThis, globals);
    create([]).requestAdapter().then((a) => {
      if (!a) { console.log("NONE"); process.exit(0); }
      console.log("ADAPTER " + (a.info?.device || a.info?.description || a.info?.vendor || "found"));
      process.exit(0);
    }, (e) => { console.log("ERROR " + e.message); process.exit(0); });`;
  const result = sh(process.execPath, ["-e", script], { cwd: join(root, "packages", "tensor"), timeout: 30_000 });
  const line = (result.stdout ?? "").split("\n").find((l) => /^(ADAPTER|NONE|ERROR)/.test(l));
  if (line?.startsWith("ADAPTER")) return null;
  if (result.status !== 0 && !line)
    return `the webgpu package did not load (${(result.stderr ?? "").trim().split("\n").pop()})`;
  return line === "NONE" ? "no WebGPU adapter (no Vulkan driver Dawn accepts)" : (line ?? "probe failed");
}

function probeChromium() {
  for (const bin of ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]) {
    if (existsSync(bin)) return null;
  }
  return "no Chromium binary (/usr/bin/chromium)";
}

function probeBlas() {
  const result = sh("ldconfig", ["-p"]);
  if (result.status === 0 && /libopenblas\.so\.0|libmkl_rt\.so|libblis\.so|libcblas\.so\.3/.test(result.stdout))
    return null;
  if (process.platform === "darwin") return null; // Accelerate is part of macOS
  return "no CBLAS library (OpenBLAS, MKL or BLIS) on the loader path";
}

/**
 * oneDNN's bf16 GEMM: libdnnl on the loader path and a CPU it has kernels for. The library loads on any
 * x86-64, but without AVX-512 every dnnl_gemm_bf16bf16f32 call returns "unimplemented" (kiln's loadOneDnn
 * asks the same with a 1 × 1 product).
 */
function cpuForOneDnnBf16() {
  if (process.platform === "linux" && process.arch === "x64" && existsSync("/proc/cpuinfo")) {
    const flags =
      readFileSync("/proc/cpuinfo", "utf8")
        .match(/^flags\s*:(.*)$/m)?.[1]
        .split(/\s+/) ?? [];
    if (!flags.includes("avx512f"))
      return "this CPU has no AVX-512, for which oneDNN's bf16 GEMM has no kernel (the native backend widens bf16 to f32 here)";
  }
  return null;
}

function probeOneDnnBf16() {
  const result = sh("ldconfig", ["-p"]);
  if (result.status === 0 && /libdnnl\.so/.test(result.stdout)) return null;
  // macOS has no loader cache: look where Homebrew puts it (the name loadOneDnn loads there).
  if (
    process.platform === "darwin" &&
    ["/opt/homebrew/lib", "/usr/local/lib"].some((d) => existsSync(join(d, "libdnnl.3.dylib")))
  )
    return null;
  return "no libdnnl (oneDNN) on the loader path";
}

/** node-llama-cpp's prebuilt llama.cpp (an npm package, not a system one) loads on the CPU, or the reason it does not. */
function probeLlamaCpp(root) {
  const result = sh(process.execPath, [join(root, "tooling", "scripts", "probe-llama-cpp.mjs")], {
    cwd: root,
    timeout: 60_000,
  });
  const line = (result.stdout ?? "").split("\n").find((l) => l.startsWith("LLAMA "));
  if (line === "LLAMA ok") return null;
  return line ? `node-llama-cpp did not load: ${line.slice(6)}` : "node-llama-cpp probe failed";
}

/** @returns {SystemDep[]} */
function systemDeps(root) {
  return [
    {
      suite: "webgpu",
      env: "KILN_WEBGPU",
      why: "the WebGPU backend's parity suite",
      probe: () => probeWebgpu(root),
      apt: ["mesa-vulkan-drivers"],
      backports: true,
      manual:
        "Debian 12: add bookworm-backports to apt and `apt-get install -t bookworm-backports mesa-vulkan-drivers` (Mesa ≥ 24; Mesa 22 is refused by Dawn); elsewhere any Vulkan driver or a GPU",
    },
    {
      suite: "browser",
      env: "KILN_BROWSER",
      why: "the headless-Chromium suite",
      probe: probeChromium,
      apt: ["chromium"],
      manual: "`apt-get install chromium` (Debian) or install Chromium/Chrome at /usr/bin/chromium",
    },
    {
      suite: "native",
      env: "KILN_NATIVE",
      why: "the native (CBLAS) backend's suite",
      probe: probeBlas,
      // libdnnl2: oneDNN's bf16 GEMM, which the native backend uses for bf16 weights where it loads.
      apt: ["libopenblas0-pthread", "libdnnl2"],
      manual:
        "`apt-get install libopenblas0-pthread libdnnl2` (Debian), `dnf install openblas onednn` or `brew install openblas onednn`",
    },
    {
      suite: "oneDNN bf16",
      env: "KILN_ONEDNN_BF16",
      why: "the native backend's oneDNN bf16 GEMM tests",
      probe: probeOneDnnBf16,
      // What no package fixes: checked first, and then nothing is installed for it.
      cpu: cpuForOneDnnBf16,
      apt: ["libdnnl2"],
      manual: "`apt-get install libdnnl2` (Debian) on a CPU with AVX-512",
    },
    {
      suite: "llama.cpp",
      env: "KILN_LLAMA_CPP",
      why: "the llama.cpp cross-check suite (GGUF export run in llama.cpp)",
      probe: () => probeLlamaCpp(root),
      // From npm (node-llama-cpp's prebuilt binaries for Linux x64/arm64, macOS, Windows), not apt.
      apt: [],
      manual:
        "`pnpm install` on a platform node-llama-cpp 3.21.1 ships prebuilt binaries for (Linux x64/arm64, macOS, Windows)",
    },
  ];
}

function aptInstall(deps) {
  const codename = debianCodename();
  if (deps.some((d) => d.backports)) {
    if (codename === "bookworm" && !existsSync(BACKPORTS_LIST)) {
      const listed = sh("grep", ["-rqs", "bookworm-backports", "/etc/apt/sources.list", "/etc/apt/sources.list.d"]);
      if (listed.status !== 0) {
        writeFileSync(BACKPORTS_LIST, "deb http://deb.debian.org/debian bookworm-backports main\n");
      }
    }
  }
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const quiet = { env, stdio: "inherit", timeout: 900_000 };
  console.log(`[kiln] installing system packages for: ${deps.map((d) => d.suite).join(", ")}`);
  if (sh("apt-get", ["update", "-qq"], quiet).status !== 0) return false;
  let ok = true;
  const plain = deps.filter((d) => !(d.backports && codename === "bookworm")).flatMap((d) => d.apt);
  const backported = deps.filter((d) => d.backports && codename === "bookworm").flatMap((d) => d.apt);
  if (backported.length > 0) {
    const r = sh("apt-get", ["install", "-y", "-qq", "-t", "bookworm-backports", ...backported], quiet);
    ok &&= r.status === 0;
  }
  if (plain.length > 0) {
    const r = sh("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...plain], quiet);
    ok &&= r.status === 0;
  }
  return ok;
}

/**
 * Probe, install where possible, probe again. Returns the environment marking each runnable
 * suite as required and the list of suites that cannot run here (with the reason and the fix).
 * `suites` narrows it to the named ones (the demo needs only "native").
 */
export function ensureSystemDeps(root, suites = null) {
  const deps = systemDeps(root).filter((d) => suites === null || suites.includes(d.suite));
  const probe = (d) => {
    const cpu = d.cpu?.() ?? null;
    return cpu === null ? { reason: d.probe(), hardware: false } : { reason: cpu, hardware: true };
  };
  let missing = deps.map((d) => ({ dep: d, ...probe(d) })).filter((m) => m.reason !== null);
  const canApt = process.platform === "linux" && process.getuid?.() === 0 && sh("apt-get", ["--version"]).status === 0;
  const installable = missing.filter((m) => m.dep.apt.length > 0 && !m.hardware);
  if (installable.length > 0 && canApt) {
    aptInstall(installable.map((m) => m.dep));
    missing = missing.map((m) => ({ dep: m.dep, ...probe(m.dep) })).filter((m) => m.reason !== null);
  }
  const env = {};
  for (const d of deps) {
    if (!missing.some((m) => m.dep === d)) env[d.env] = "required";
  }
  for (const m of missing) {
    console.log(
      `[kiln] MISSING for ${m.dep.why}: ${m.reason}.${m.hardware ? " Needs:" : " Install:"} ${m.dep.manual}.${suites === null ? " That suite will report NOT RUN." : ""}`,
    );
  }
  return { env, notRun: missing.map((m) => `${m.dep.suite} (${m.reason})`) };
}
