// Starts kiln serve's model worker from the TypeScript sources (tests and `tsx` runs): tsx's
// loader is registered in this thread first, since loader flags are not inherited by workers.
import { workerData } from "node:worker_threads";
import { register } from "tsx/esm/api";

register();
await import(workerData.entry);
