// Prints "LLAMA ok" when node-llama-cpp's prebuilt llama.cpp loads on the CPU, else "LLAMA <reason>".
// A file of its own (not `node -e`): node-llama-cpp tests its binding in a child process that
// inherits this process's arguments.
try {
  const { getLlama } = await import("node-llama-cpp");
  await getLlama({ gpu: false, build: "never", logLevel: "error" });
  console.log("LLAMA ok");
} catch (e) {
  console.log(`LLAMA ${String(e?.message ?? e).split("\n")[0]}`);
}
process.exit(0);
