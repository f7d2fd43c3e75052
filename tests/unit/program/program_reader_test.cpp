// Reading `.pt2` programs: every fixture program, and bad archives of every kind.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "compiler/program/program_reader.h"
#include "tests/unit/program/test_archives.h"

namespace weft::program {
namespace {

using testing::CopyArchive;
using testing::ReadFile;
using testing::TempPath;
using testing::WriteFile;

const std::string kPrograms = std::string(WEFT_FIXTURES) + "/programs";
const std::string kFlux = kPrograms + "/flux-tiny/program.pt2";

std::string ErrorOf(const std::string& path) {
  try {
    ReadProgramFile(path);
  } catch (const ProgramError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProgramReaderTest, ReadsTheFixturePrograms) {
  for (const char* name : {"flux-tiny", "flux2-tiny", "qwen-image-tiny", "wan-tiny", "wan-tiny-i2v", "chronoedit-tiny",
                           "helios-tiny", "ltx-video-tiny", "ltx-2-tiny", "minimax-h3-tiny", "hunyuanvideo-tiny"}) {
    for (const char* file : {"program.pt2", "program_bf16.pt2"}) {
      Program p = ReadProgramFile(kPrograms + "/" + name + "/" + file);
      EXPECT_EQ(p.schema_major, 8) << name;
      ASSERT_TRUE(p.manifest) << name;
      EXPECT_EQ(p.manifest->name, name);
      EXPECT_GT(p.nodes.size(), 100u) << name;
      EXPECT_FALSE(p.range_constraints.empty()) << name << ": token counts are dynamic";
      // Higher-order operators whose bodies are plain for inference are inlined.
      for (const Node& n : p.nodes) EXPECT_NE(n.target.rfind("torch.ops.higher_order.", 0), 0u) << name << " " << n.name;
    }
  }
}

TEST(ProgramReaderTest, FluxProgramFacts) {
  Program p = ReadProgramFile(kFlux);
  EXPECT_EQ(p.manifest->class_name, "FluxTransformer2DModel");
  EXPECT_EQ(p.manifest->dtype, "f32");
  EXPECT_EQ(p.ForwardArgNames(), (std::vector<std::string>{"hidden_states", "encoder_hidden_states", "pooled_projections",
                                                            "timestep", "img_ids", "txt_ids", "guidance", "return_dict"}));
  size_t sdpa = 0;
  for (const Node& n : p.nodes) sdpa += n.target == "torch.ops.aten.scaled_dot_product_attention.default";
  EXPECT_EQ(sdpa, 4u);  // 2 double + 2 single blocks: attention stays one node
  size_t params = 0;
  for (const InputSpec& s : p.input_specs) params += s.kind == InputSpec::Kind::kParameter;
  EXPECT_EQ(params, p.weights.size());
}

// The sizes the forward fixed at export (tools/export_program.py's `fixed_sizes`): read as written;
// a malformed entry is refused naming the field. Programs written before the field have none.
TEST(ProgramReaderTest, FixedSizesAreReadAndCheckedByField) {
  EXPECT_TRUE(ReadProgramFile(kPrograms + "/flux2-tiny/program.pt2").manifest->fixed_sizes.empty());
  // FluxPosEmbed loops over the axes of the position ids: their count is fixed, and where.
  const std::vector<FixedSize> flux = ReadProgramFile(kFlux).manifest->fixed_sizes;
  ASSERT_EQ(flux.size(), 1u);
  EXPECT_EQ(flux[0].size, "txt_ids.shape[1]");
  EXPECT_EQ(flux[0].value, 3);
  EXPECT_EQ(flux[0].at, "diffusers/models/transformers/transformer_flux.py:513 in forward");
  EXPECT_EQ(flux[0].code, "for i in range(n_axes):");
  auto with = [](const nlohmann::json& fixed, const std::string& path) {
    CopyArchive(kFlux, path, [&](const std::string& name, std::string data) -> std::optional<std::string> {
      if (name != "extra/weft.json") return data;
      nlohmann::json j = nlohmann::json::parse(data);
      j["fixed_sizes"] = fixed;
      return j.dump();
    });
  };
  // `code` may be left out (the export found no source line).
  const std::string no_code = TempPath("fixed_sizes_no_code.pt2");
  with(nlohmann::json::array({{{"size", "t.shape[0]"}, {"value", 2}, {"at", "model.py:3 in forward"}}}), no_code);
  const std::vector<FixedSize> fixed = ReadProgramFile(no_code).manifest->fixed_sizes;
  ASSERT_EQ(fixed.size(), 1u);
  EXPECT_EQ(fixed[0].at, "model.py:3 in forward");
  EXPECT_EQ(fixed[0].code, "");
  const std::string bad = TempPath("fixed_sizes_bad.pt2");
  with(nlohmann::json::array({{{"size", "t.shape[0]"}, {"value", "two"}, {"at", "model.py:3 in forward"}}}), bad);
  const std::string error = ErrorOf(bad);
  EXPECT_NE(error.find("extra/weft.json.fixed_sizes.value"), std::string::npos) << error;
}

TEST(ProgramReaderTest, NotAZip) {
  const std::string path = TempPath("not_a_zip.pt2");
  WriteFile(path, "this is a plan, not a program\n");
  EXPECT_EQ(ErrorOf(path), path + ": cannot read the program: not a zip archive (a .pt2 program is one; is the file truncated?)");
  EXPECT_EQ(ErrorOf(TempPath("missing.pt2")), TempPath("missing.pt2") + ": cannot open the program: No such file or directory");
}

TEST(ProgramReaderTest, Truncated) {
  const std::string bytes = ReadFile(kFlux);
  const std::string path = TempPath("truncated.pt2");
  WriteFile(path, bytes.substr(0, bytes.size() / 2));
  const std::string error = ErrorOf(path);
  EXPECT_EQ(error.rfind(path + ": cannot read the program: ", 0), 0u) << error;
}

TEST(ProgramReaderTest, MissingModelJson) {
  const std::string path = TempPath("no_model.pt2");
  CopyArchive(kFlux, path, [](const std::string& name, std::string data) -> std::optional<std::string> {
    if (name == "models/model.json") return std::nullopt;
    return data;
  });
  EXPECT_EQ(ErrorOf(path), path + ": no `archive/models/model.json` (not a torch.export program)");
}

TEST(ProgramReaderTest, UnsupportedSchemaVersion) {
  const std::string path = TempPath("schema9.pt2");
  CopyArchive(kFlux, path, [](const std::string& name, std::string data) -> std::optional<std::string> {
    if (name != "models/model.json") return data;
    nlohmann::json j = nlohmann::json::parse(data);
    j["schema_version"] = {{"major", 9}, {"minor", 1}};
    return j.dump();
  });
  EXPECT_EQ(ErrorOf(path), path + ": archive/models/model.json: export schema version 9.1; weft reads version 8.x "
                                  "(torch 2.5 to 2.13 write 8.x)");
}

TEST(ProgramReaderTest, MalformedDocumentNamesTheNode) {
  const std::string path = TempPath("bad_node.pt2");
  CopyArchive(kFlux, path, [](const std::string& name, std::string data) -> std::optional<std::string> {
    if (name != "models/model.json") return data;
    nlohmann::json j = nlohmann::json::parse(data);
    j["graph_module"]["graph"]["nodes"][3].erase("target");
    return j.dump();
  });
  const std::string error = ErrorOf(path);
  EXPECT_NE(error.find("archive/models/model.json: node 3"), std::string::npos) << error;
  EXPECT_NE(error.find("missing field `target`"), std::string::npos) << error;
}

TEST(ProgramReaderTest, CorruptedEntryFailsItsCrc) {
  // Flip a byte inside the (deflated) model.json: the entry no longer inflates or its CRC fails.
  std::string bytes = ReadFile(kFlux);
  const size_t at = bytes.find("models/model.json");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 200] = static_cast<char>(bytes[at + 200] ^ 0x5a);
  const std::string path = TempPath("corrupted.pt2");
  WriteFile(path, bytes);
  const std::string error = ErrorOf(path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("models/model.json"), std::string::npos) << error;
}

// JSON nested thousands deep is refused by its depth, not read recursively into a stack overflow
// (issue 28 defect 5, the JSON side): in the graph and in a module's input spec.
TEST(ProgramReaderTest, DeepNestingIsRefusedNotRecursed) {
  Archive a = Archive::Open(kFlux);
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  {
    nlohmann::json j = nlohmann::json::parse(a.Read("models/model.json"));
    j["graph_module"]["graph"]["nodes"][3]["metadata"]["weft_probe"] = "PROBE";
    std::string text = j.dump();
    text.replace(text.find("\"PROBE\""), 7, deep);
    try {
      ParseProgramJson(text, "deep.pt2: models/model.json");
      FAIL() << "a 5000-deep document was read";
    } catch (const ProgramError& e) {
      EXPECT_STREQ(e.what(), "deep.pt2: models/model.json: nests 5006 levels deep; weft reads JSON nested at most 256 deep");
    }
  }
  {
    nlohmann::json j = nlohmann::json::parse(a.Read("models/model.json"));
    nlohmann::json spec = {{"type", nullptr}, {"context", nullptr}, {"children_spec", nlohmann::json::array()}};
    std::string text = spec.dump();
    for (int i = 0; i < 5000; ++i) text = R"({"type": "builtins.tuple", "context": "null", "children_spec": [)" + text + "]}";
    j["graph_module"]["module_call_graph"][0]["signature"]["in_spec"] = "[1, " + text + "]";
    try {
      ParseProgramJson(j.dump(), "deep.pt2: models/model.json");
      FAIL() << "a 5000-deep input spec was read";
    } catch (const ProgramError& e) {
      EXPECT_STREQ(e.what(), "deep.pt2: models/model.json: module_call_graph: module ``.in_spec: nests 10003 levels deep; "
                             "weft reads JSON nested at most 256 deep");
    }
  }
}

}  // namespace
}  // namespace weft::program
