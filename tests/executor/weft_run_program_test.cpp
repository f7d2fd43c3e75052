// `weft-run --program`: exported programs end to end through the runner -- the one-rank check,
// outputs equal to diffusers', programs of classes weft has no C++ model for, traces -- and the
// refusals of bad requests, each with its message.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <map>
#include <tuple>
#include <vector>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "compiler/plan/mesh_spec.h"
#include "runtime/dist/mesh.h"
#include "runtime/io/safetensors.h"

namespace {

const std::string kWeftRun = WEFT_RUN_PATH;
const std::string kPrograms = std::string(WEFT_SOURCE_DIR) + "/tests/fixtures/programs";

struct Shell {
  int status = -1;
  std::string output;
};

Shell Sh(const std::string& command) {
  Shell s;
  FILE* p = ::popen(("env -u RANK -u WORLD_SIZE -u LOCAL_RANK " + command + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) s.output.append(buf.data(), n);
  const int st = ::pclose(p);
  s.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return s;
}

std::string Temp(const std::string& name) { return ::testing::TempDir() + "/weft_run_program_test_" + name; }

// The JSON report printed on stdout among the progress lines (--no-prefix).
nlohmann::json Report(const std::string& output) {
  const size_t begin = output.find("{\n");
  const size_t end = output.rfind("\n}");
  if (begin == std::string::npos || end == std::string::npos) return nlohmann::json();
  return nlohmann::json::parse(output.substr(begin, end + 2 - begin), nullptr, false);
}

double MaxAbsDiff(const std::string& a_file, const std::string& b_file, const std::string& key) {
  at::Tensor a = weft::io::SafetensorsFile::Open(a_file).Load(key).to(at::kDouble);
  at::Tensor b = weft::io::SafetensorsFile::Open(b_file).Load(key).to(at::kDouble);
  EXPECT_EQ(a.sizes(), b.sizes());
  return (a - b).abs().max().item<double>();
}

TEST(WeftRunProgram, FluxProgramPassesItsCheckAndMatchesDiffusers) {
  const std::string dir = kPrograms + "/flux-tiny";
  const std::string out = Temp("flux.safetensors");
  // weft-run seeds weights with 1000 + --seed: --seed 20260201 gives the fixtures' weights (20261201).
  Shell s = Sh(kWeftRun + " --no-prefix --program " + dir + "/program.pt2 --inputs " + dir +
               "/inputs_64x96.safetensors --seed 20260201 --check --report json --output " + out);
  ASSERT_EQ(s.status, 0) << s.output;
  // On one rank --check compares with the same program on the plain interpreter (no fused kernels).
  EXPECT_NE(s.output.find("weft-run: check against the unsharded model passed"), std::string::npos) << s.output;
  nlohmann::json r = Report(s.output);
  ASSERT_TRUE(r.is_object()) << s.output;
  EXPECT_EQ(r["class"], "FluxTransformer2DModel");
  EXPECT_EQ(r["check"]["against"], "unsharded");
  EXPECT_TRUE(r["check"]["passed"].get<bool>());
  EXPECT_LE(r["check"]["max_rel_error"].get<double>(), 1e-4);
  EXPECT_TRUE(r["outputs_finite"].get<bool>());
  EXPECT_GT(r["fast_kernel_nodes"].get<int>(), 0);
  EXPECT_GT(r["nodes"].get<int>(), 500);
}

TEST(WeftRunProgram, ProgramOfAClassWithoutABuiltInModelRunsAndWritesEveryOutput) {
  // LTX-2 returns video and audio; its inputs carry num_frames, height, width, fps, audio_num_frames.
  const std::string dir = kPrograms + "/ltx-2-tiny";
  const std::string out = Temp("ltx2.safetensors");
  Shell s = Sh(kWeftRun + " --no-prefix --program " + dir + "/program.pt2 --inputs " + dir +
               "/inputs_96x64x9.safetensors --seed 20260201 --output " + out);
  ASSERT_EQ(s.status, 0) << s.output;
  // The fixture's weights (see above), so the outputs are diffusers'.
  const std::string want = dir + "/outputs_96x64x9.safetensors";
  EXPECT_LE(MaxAbsDiff(out, want, "output"), 1e-4 * 2);
  EXPECT_LE(MaxAbsDiff(out, want, "output_1"), 1e-4 * 2);
}

TEST(WeftRunProgram, ThePlanOfTheProgramsClassRunsOnAMeshAndMatchesTheUnshardedProgram) {
  const std::string dir = kPrograms + "/flux-tiny";
  Shell s = Sh(kWeftRun + " --no-prefix --program " + dir + "/program.pt2 --inputs " + dir +
               "/inputs_64x96.safetensors --nproc 2 --mesh ulysses=2 --check --report json");
  ASSERT_EQ(s.status, 0) << s.output;
  nlohmann::json r = Report(s.output);
  ASSERT_TRUE(r.is_object()) << s.output;
  EXPECT_EQ(r["plan"], "flux");
  EXPECT_EQ(r["check"]["against"], "unsharded");
  EXPECT_TRUE(r["check"]["passed"].get<bool>());
  // plans/flux.weft: 4 root splits, 1 gather, the 4 attention sites context-parallel.
  EXPECT_EQ(r["edits"]["split"], 4);
  EXPECT_EQ(r["edits"]["gather"], 1);
  EXPECT_EQ(r["edits"]["attention"], 4);
}

// Each collective of a report as (op, axis, calls, bytes), sorted.
std::vector<std::tuple<std::string, std::string, int64_t, int64_t>> Collectives(const nlohmann::json& r) {
  std::vector<std::tuple<std::string, std::string, int64_t, int64_t>> out;
  for (const auto& c : r["collectives_per_forward"]) {
    out.emplace_back(c["op"], c["axis"], c["calls"].get<int64_t>(), c["bytes_sent"].get<int64_t>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Item 4 of the plans-on-programs issue: on the same mesh, weights and inputs, the fixture program
// with its class's plan compiled in makes exactly the collectives of `--model NAME` (the program
// weft-run exports into its cache: op, axis, calls, bytes), and on every axis they are what the compiler predicted for the program -- the tp
// all-reduces (rowwise outputs, Wan's RMS statistics), the Ulysses all-to-alls, the ring's
// all-gathers or p2p exchanges, the masks moving with their keys (padded text of QwenImage and
// LTX, HunyuanVideo's joint mask; a mask with no masked key does not travel, so the padded
// inputs), the output gather -- plus the attention kernels' shape records (64 bytes from each
// other rank of the group, on a site's first call, runtime/attention/attention.h) that the
// prediction leaves out: whatever calls the prediction does not count are exactly those records.
TEST(WeftRunProgram, PlansOnProgramsMakeTheBuiltInModelsCollectivesAsPredicted) {
  struct Case {
    std::string model, program, inputs, mesh;  // model "": compared with the prediction only
  };
  const std::vector<Case> cases = {
      {"flux:tiny", "flux-tiny", "inputs_64x96", "tp=2,ulysses=2"},
      {"flux:tiny", "flux-tiny", "inputs_64x96", "ring=2"},
      {"wan:tiny", "wan-tiny", "inputs_64x64x5", "tp=2,ulysses=2"},
      {"wan:tiny", "wan-tiny", "inputs_64x64x5", "tp=2,ring=2 --rotate p2p"},
      {"", "qwen-image-tiny", "inputs_128x96-padded", "ulysses=2"},
      {"", "qwen-image-tiny", "inputs_128x96-padded", "ring=2,ulysses=2"},
      {"", "ltx-video-tiny", "inputs_128x96x17-padded", "ring=2 --rotate p2p"},
      {"", "hunyuanvideo-tiny", "inputs_64x48x9-padded", "ring=2"},
      // Audio queries whole on every rank over split video keys (video_to_audio_attn).
      {"", "ltx-2-tiny", "inputs_128x96x17-padded", "ulysses=2"},
      {"", "ltx-2-tiny", "inputs_128x96x17-padded", "ring=2,ulysses=2"},
      // Guidance branches over cfg (issue 26): the output gather, and the CP and TP collectives
      // of the first cfg rank's branches -- two of three when cfg=2 does not divide them.
      {"", "wan-tiny", "inputs_64x64x5", "cfg=2,tp=2"},
      {"", "flux-tiny", "inputs_128x128-b3", "cfg=2,ulysses=2"},
      {"", "qwen-image-tiny", "inputs_128x96-b3", "cfg=2,ring=2"},
      {"", "hunyuanvideo-tiny", "inputs_64x48x9-b3", "cfg=2,ulysses=2"},
      // Weights sliced over ranks: one all-gather per block, this rank's slice to each other.
      {"", "flux-tiny", "inputs_64x96", "tp=2,ulysses=2 --shard-weights cp"},
      {"", "wan-tiny", "inputs_64x64x5", "cfg=2,ring=2 --shard-weights cp,cfg"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.program + " on " + c.mesh);
    const std::string dir = kPrograms + "/" + c.program;
    const std::string common = " --no-prefix --seed 20260201 --inputs " + dir + "/" + c.inputs +
                               ".safetensors --mesh " + c.mesh + " --report json";
    Shell program = Sh(kWeftRun + " --program " + dir + "/program.pt2" + common);
    ASSERT_EQ(program.status, 0) << program.output;
    const nlohmann::json p = Report(program.output);
    ASSERT_TRUE(p.is_object()) << program.output;
    if (!c.model.empty()) {
      Shell builtin = Sh(kWeftRun + " --model " + c.model + common);
      ASSERT_EQ(builtin.status, 0) << builtin.output;
      const nlohmann::json b = Report(builtin.output);
      ASSERT_TRUE(b.is_object()) << builtin.output;
      EXPECT_EQ(Collectives(p), Collectives(b)) << p.dump(1) << b.dump(1);
    }
    std::map<std::string, std::pair<int64_t, int64_t>> measured, predicted;  // axis -> calls, bytes
    for (const auto& m : p["collectives_per_forward"]) {
      measured[m["axis"]].first += m["calls"].get<int64_t>();
      measured[m["axis"]].second += m["bytes_sent"].get<int64_t>();
    }
    for (const auto& want : p["predicted_per_forward"]) {
      predicted[want["axis"]] = {want["collectives"].get<int64_t>(), want["bytes_sent"].get<int64_t>()};
    }
    ASSERT_FALSE(predicted.empty());
    // A shape record is 64 bytes all-gathered from each other rank of its group.
    std::string mesh_error;
    const std::optional<weft::plan::MeshSpec> mesh = weft::plan::ParseMeshSpec(p["mesh"].get<std::string>(), &mesh_error);
    ASSERT_TRUE(mesh) << mesh_error;
    std::map<std::string, int64_t> size = {{"cp", mesh->ring * mesh->ulysses}, {"world", mesh->WorldSize()}};
    for (std::string_view axis : mesh->order) size[std::string(axis)] = mesh->Size(axis);
    for (const auto& [axis, m] : measured) {
      const auto want = predicted[axis];
      const int64_t records = m.first - want.first;
      EXPECT_GE(records, 0) << axis << p.dump(1);
      EXPECT_EQ(m.second - want.second, 64 * (size[axis] - 1) * records) << axis << p.dump(1);
    }
    for (const auto& [axis, want] : predicted) EXPECT_TRUE(measured.count(axis)) << axis;
    if (c.mesh.find("tp=2") != std::string::npos) {
      EXPECT_GT(measured["tp"].first, 0);
    }
  }
}

TEST(WeftRunProgram, TraceHasTheProgramsModuleSpans) {
  const std::string dir = kPrograms + "/flux-tiny";
  const std::string prefix = Temp("trace");
  Shell s = Sh(kWeftRun + " --no-prefix --program " + dir + "/program.pt2 --trace " + prefix);
  ASSERT_EQ(s.status, 0) << s.output;
  std::ifstream in(prefix + ".rank0.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<std::string, int> spans;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X") spans[e["name"].get<std::string>()] += 1;
  }
  EXPECT_EQ(spans["<root>"], 1);
  EXPECT_EQ(spans["transformer_blocks.0"], 1);
  EXPECT_EQ(spans["single_transformer_blocks.1"], 1);
  EXPECT_EQ(spans["x_embedder"], 1);
}

TEST(WeftRunProgram, BadRequestsAreRefusedByName) {
  const std::string flux = kPrograms + "/flux-tiny/program.pt2";
  Shell s = Sh(kWeftRun + " --no-prefix --program " + flux + " --dtype bf16");
  EXPECT_NE(s.status, 0);
  EXPECT_NE(s.output.find("--dtype bf16: the program " + flux + " was exported in Float (its casts are baked in); "
                          "export it again with tools/export_program.py --dtype bf16"),
            std::string::npos)
      << s.output;
  s = Sh(kWeftRun + " --no-prefix --program " + flux + " --smoke");
  EXPECT_EQ(s.status, 2);
  EXPECT_NE(s.output.find("--program runs a program; --smoke runs no model"), std::string::npos) << s.output;
  // A plan of another class.
  s = Sh(kWeftRun + " --no-prefix --program " + flux + " --nproc 2 --plan " + std::string(WEFT_SOURCE_DIR) + "/plans/wan.weft");
  EXPECT_NE(s.status, 0);
  EXPECT_NE(s.output.find("for WanTransformer3DModel"), std::string::npos) << s.output;
  // Helios takes frame indices: weft does not make up integer inputs.
  s = Sh(kWeftRun + " --no-prefix --program " + kPrograms + "/helios-tiny/program.pt2");
  EXPECT_NE(s.status, 0);
  EXPECT_NE(s.output.find("input `indices_hidden_states` is an integer tensor (i64), which weft cannot make up; give "
                          "--inputs"),
            std::string::npos)
      << s.output;
  // --check works for every class: here LTX-2 (no hand-written twin ever existed) on one rank.
  s = Sh(kWeftRun + " --no-prefix --program " + kPrograms + "/ltx-2-tiny/program.pt2 --inputs " + kPrograms +
         "/ltx-2-tiny/inputs_96x64x9.safetensors --check");
  EXPECT_EQ(s.status, 0) << s.output;
  EXPECT_NE(s.output.find("weft-run: check against the unsharded model passed"), std::string::npos) << s.output;
}

// A program and a model name two models: the pair is refused, not --model ignored (issue 28
// defect 18); `--model NAME` alone runs the program of NAME.
TEST(WeftRunProgram, ProgramWithAnotherModelIsRefused) {
  const std::string flux = kPrograms + "/flux-tiny/program.pt2";
  Shell s = Sh(kWeftRun + " --no-prefix --program " + flux + " --model wan:tiny");
  EXPECT_EQ(s.status, 2) << s.output;
  EXPECT_EQ(s.output, "weft-run: --program " + flux + " and --model wan:tiny both name the model to run; give one\n");
}

TEST(WeftRunProgram, ModelDirOfAnotherConfigIsRefused) {
  // tests/fixtures/flux_tiny/model holds flux-tiny's config and a checkpoint: with one value changed
  // that moves no shape (the RoPE axes), the directory is another model than the program's.
  const std::string dir = Temp("model_dir");
  ASSERT_EQ(Sh("rm -rf " + dir + " && cp -r " + std::string(WEFT_SOURCE_DIR) + "/tests/fixtures/flux_tiny/model " + dir).status, 0);
  std::ifstream in(dir + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  in.close();
  cfg["axes_dims_rope"] = {4, 4, 8};
  std::ofstream(dir + "/config.json") << cfg.dump();
  Shell s = Sh(kWeftRun + " --no-prefix --program " + kPrograms + "/flux-tiny/program.pt2 --model-dir " + dir);
  EXPECT_NE(s.status, 0);
  EXPECT_NE(s.output.find("/config.json differs from the config the program was exported with: axes_dims_rope = "
                          "[4,4,8] (the program: [4,6,6])"),
            std::string::npos)
      << s.output;
  cfg["axes_dims_rope"] = {4, 6, 6};
  std::ofstream(dir + "/config.json") << cfg.dump();
  s = Sh(kWeftRun + " --no-prefix --program " + kPrograms + "/flux-tiny/program.pt2 --model-dir " + dir + " --check");
  EXPECT_EQ(s.status, 0) << s.output;
}

}  // namespace
