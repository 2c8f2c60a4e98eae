// kit ships a real pretrained tiny model (llama2.c stories260K, MIT) under data/ so the
// demo runs on embedded defaults. Works from src/ (tests, tsx) and dist/ (published).
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export function kitDataDir(): string {
  return join(dirname(fileURLToPath(import.meta.url)), "..", "data");
}

export function stories260KPaths(): { checkpoint: string; tokenizer: string } {
  const dir = join(kitDataDir(), "stories260K");
  return { checkpoint: join(dir, "stories260K.bin"), tokenizer: join(dir, "tok512.bin") };
}
