// Each value of a preset names its source: the seed card, kiln's reason, the preset that set it, or the user.
import { describe, expect, it } from "vitest";
import { presetsReport } from "../../src/cli/presets-command.js";
import { configProvenance, pathMatches, presetLayers, provenanceBlock } from "../../src/recipes/preset-provenance.js";
import { presetConfig } from "../../src/recipes/presets.js";
import { reproConfig, reproLayers, reproQuickConfig } from "../../src/repro/config.js";

const sourceOf = (sources: { path: string; source: string }[], path: string) =>
  sources.find((s) => s.path === path)?.source;

describe("preset provenance", () => {
  it("path patterns: * within a part, a section covers its fields", () => {
    expect(pathMatches("turnDpo*.studentEpisodes", "turnDpo2.studentEpisodes")).toBe(true);
    expect(pathMatches("turnDpo*.studentEpisodes", "branchDpo.studentEpisodes")).toBe(false);
    expect(pathMatches("rollout", "rollout.maxTokens")).toBe(true);
    expect(pathMatches("rollout", "rolloutX")).toBe(false);
    expect(pathMatches("*.lr", "sft.lr")).toBe(true);
    expect(pathMatches("*.lr", "sft.lr.x")).toBe(true);
    expect(pathMatches("train.lr", "train.lrx")).toBe(false);
  });

  it("the seed preset: the card's values and kiln's, each with its source", () => {
    const opd = configProvenance("opd", presetLayers("opd", "seed"), presetConfig("opd", "seed"));
    expect(sourceOf(opd, "lora.r")).toBe("seed 000");
    expect(sourceOf(opd, "objective.clamp")).toBe("seed 000");
    expect(sourceOf(opd, "baseDtype")).toMatch(/^kiln: the frozen base in f32 \(the seeds load bf16\)/);
    expect(sourceOf(opd, "rounds")).toBe("kiln's default: the seed card does not state it");
    expect(opd.some((s) => s.path === "recipe")).toBe(false);
    const oel = configProvenance("oel", [], presetConfig("oel", "seed"));
    expect(sourceOf(oel, "train.lr")).toMatch(/^seed 004: the top of the authors' LoRA range/);
    expect(oel.find((s) => s.path === "train.lr")?.fromCard).toBe(true);
    expect(sourceOf(oel, "train.epochs")).toBe("kiln's default: the seed card does not state it");
    expect(sourceOf(oel, "eval.trials")).toBe("seed 004");
    const arp = configProvenance("arp", [], presetConfig("arp", "seed"));
    expect(sourceOf(arp, "sft.lr")).toBe("seeds 002/003");
    expect(sourceOf(arp, "turnDpo2.studentEpisodes")).toBe("kiln's default: the seed card does not state it");
    // Every value has a source.
    for (const s of [...opd, ...oel, ...arp]) expect(s.source, s.path).not.toBe("");
  });

  it("a preset's overrides are the preset's; a value the user set is theirs; an override equal to the default is not", () => {
    const tiny = presetConfig("arp", "tiny");
    tiny.scale = 0.5;
    const arp = configProvenance("arp", presetLayers("arp", "tiny"), tiny);
    expect(sourceOf(arp, "sft.lr")).toBe(
      "tiny: the seed's stages sized for a CPU and the embedded tiny model (minutes)",
    );
    expect(sourceOf(arp, "sft.schedule")).toBe("seeds 002/003");
    expect(sourceOf(arp, "scale")).toBe("yours: --set / --config");
    const quick = configProvenance("oel", reproLayers("oel", true), reproQuickConfig().oel);
    expect(sourceOf(quick, "tasks")).toBe("--quick: seconds-scale pipeline check");
    expect(sourceOf(quick, "lora.dropout")).toBe("kiln's default: the seed card does not state it");
    // --quick sets rollout.temperature to 1, the default's value: still the default's source.
    expect(sourceOf(quick, "rollout.temperature")).toBe("kiln's default: the seed card does not state it");
    const opd = configProvenance("opd", reproLayers("opd", false), reproConfig().opd);
    expect(sourceOf(opd, "objective.divergence")).toBe("seed 000");
    expect(sourceOf(opd, "episodesPerRound")).toMatch(/^repro: 2 fresh-start rollouts/);
    expect(sourceOf(opd, "objective.clamp")).toBe("seed 000");
  });

  it("the block lists the card's paths, then kiln's values grouped by reason; kiln presets prints every preset", () => {
    const block = provenanceBlock("t:", configProvenance("oel", reproLayers("oel", false), reproConfig().oel));
    expect(block).toMatch(/^t:\n {2}follows the seed card \(seed 004\), 5 values: train\.lr, .*eval\.trials/);
    expect(block).toContain("- repro: a smaller adapter for 2 CPU cores: lora.r = 8, lora.alpha = 16");
    expect(block).toContain("baseDtype = f32");
    const report = presetsReport();
    for (const head of ["kiln arp --preset seed", "kiln opd --preset tiny", "kiln repro oel --quick"])
      expect(report).toContain(head);
    expect(presetsReport("opd")).not.toContain("kiln arp");
  });
});
