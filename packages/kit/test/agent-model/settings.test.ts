import { describe, expect, it } from "vitest";
import { AGENT_MODEL_SIZE } from "../../src/agent-model/build.js";
import { AGENT_MODEL_CORPUS } from "../../src/agent-model/extras.js";
import {
  agentModelSettingKeys,
  agentModelSettings,
  checkAgentModelSize,
  checkCopyWarmup,
} from "../../src/agent-model/settings.js";
import { setAssignments } from "../../src/cli/args.js";
import { UsageError } from "../../src/errors.js";

const parse = (set: string) => agentModelSettings(setAssignments(set));

describe("kiln agent-model --set", () => {
  it("sets the size and the corpus, keeping every other clembench game's count", () => {
    const s = parse(
      "size.hiddenSize=192;size.layers=6;corpus.copyDrills=0;corpus.tau2TurnRate=0.25;corpus.clemEpisodes.taboo=40;corpus.clemGenerated.guesswhat=0.5",
    );
    expect(s.size).toEqual({ hiddenSize: 192, layers: 6 });
    expect(s.corpus.copyDrills).toBe(0);
    expect(s.corpus.tau2TurnRate).toBe(0.25);
    expect(s.corpus.clemEpisodes).toEqual({ ...AGENT_MODEL_CORPUS.clemEpisodes, taboo: 40 });
    expect(s.corpus.clemGenerated).toEqual({ ...AGENT_MODEL_CORPUS.clemGenerated, guesswhat: 0.5 });
    expect(parse("")).toEqual({ size: {}, corpus: {}, build: {}, train: {} });
    expect(parse("train.maxLength=1280;train.batchSize=3").train).toEqual({ maxLength: 1280, batchSize: 3 });
    expect(parse("corpus.guessNumberEpisodes=0;corpus.stories=8").build).toEqual({
      guessNumberEpisodes: 0,
      stories: 8,
    });
  });

  it("refuses unknown keys and values out of range, naming them", () => {
    expect(() => parse("size.width=3")).toThrow(UsageError);
    expect(() => parse("size.width=3")).toThrow(/unknown key "size.width".*size\.hiddenSize/);
    expect(() => parse("corpus.clemEpisodes.chess=3")).toThrow(/unknown key "corpus.clemEpisodes.chess"/);
    expect(() => parse("corpus.clemGenerated.wordle=0.5")).toThrow(/unknown key/);
    expect(() => parse("size.layers=0")).toThrow(/size.layers must be an integer ≥ 1, got "0"/);
    expect(() => parse("size.layers=2.5")).toThrow(/integer/);
    expect(() => parse("corpus.copyDrills=-1")).toThrow(/corpus.copyDrills must be an integer ≥ 0/);
    expect(() => parse("corpus.tau2TurnRate=1.5")).toThrow(/from 0 to 1, got "1.5"/);
    expect(() => parse("corpus.spellingDrills=")).toThrow(/got ""/);
    expect(() => parse("train.batchSize=0")).toThrow(/train.batchSize must be an integer ≥ 1, got "0"/);
    expect(() => parse("train.maxLength=4096")).toThrow(/from 2 to 2048 \(the model's max_position_embeddings\)/);
    expect(() => parse("train.steps=3")).toThrow(/unknown key "train.steps"/);
    expect(agentModelSettingKeys()).toContain("corpus.clemGenerated.taboo");
    expect(agentModelSettingKeys()).toContain("train.maxLength");
  });

  it("checks that heads divide the width and kv heads the heads", () => {
    expect(() => checkAgentModelSize(AGENT_MODEL_SIZE)).not.toThrow();
    expect(() => checkAgentModelSize({ ...AGENT_MODEL_SIZE, hiddenSize: 130 })).toThrow(/multiple of size.heads/);
    expect(() => checkAgentModelSize({ ...AGENT_MODEL_SIZE, heads: 6, kvHeads: 4, hiddenSize: 192 })).toThrow(
      /multiple of size.kvHeads/,
    );
    expect(() => checkAgentModelSize({ ...AGENT_MODEL_SIZE, hiddenSize: 36, heads: 4, kvHeads: 2 })).toThrow(/even/);
  });

  it("refuses a copy warm-up as long as the build or without copy drills", () => {
    expect(() => checkCopyWarmup(1500, 5500, {})).not.toThrow();
    expect(() => checkCopyWarmup(0, 1, { copyDrills: 0 })).not.toThrow();
    expect(() => checkCopyWarmup(1500, 1500, {})).toThrow(UsageError);
    expect(() => checkCopyWarmup(1500, 100, {})).toThrow(/--copy-warmup \(1500\) must be below --steps \(100\)/);
    expect(() => checkCopyWarmup(10, 100, { copyDrills: 0 })).toThrow(/corpus.copyDrills=0 leaves none/);
  });
});
