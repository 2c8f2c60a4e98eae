// Child process for the peak-RSS measurement: open a large safetensors file, read ONE tensor,
// print baseline and peak RSS (VmHWM) as JSON. Run in a fresh process so the peak is this read's.
import { readFileSync } from "node:fs";
import { SafetensorsFile } from "../src/index.js";

const hwm = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 1024;
const rss = () => process.memoryUsage().rss / 2 ** 20;

const [path, name] = process.argv.slice(2);
const before = rss();
const f = await SafetensorsFile.open(path);
const values = await f.readFloat32(name);
const peak = hwm();
await f.close();
process.stdout.write(JSON.stringify({ baselineMiB: before, peakMiB: peak, tensorMiB: values.byteLength / 2 ** 20 }));
