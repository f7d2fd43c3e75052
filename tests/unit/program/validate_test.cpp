// A program is validated as it is read (compiler/program/validate.h): the flux-tiny fixture's
// graph, edited the ways a hostile or careless file could be, is refused by name as a malformed
// program -- never a plan error (`[TpShardedDimReduced]`, `[SplitMixedWithWhole]`), a crash or a
// run of an ill-formed graph (issue 28 defects 6 and 12).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>

#include "compiler/program/archive.h"
#include "compiler/program/program_reader.h"

namespace weft::program {
namespace {

using Json = nlohmann::json;

const std::string kFlux = std::string(WEFT_FIXTURES) + "/programs/flux-tiny/program.pt2";
const char* kWhere = "flux.pt2: models/model.json";

const Json& FluxModel() {
  static const Json j = Json::parse(Archive::Open(kFlux).Read("models/model.json"));
  return j;
}

Json& GraphOf(Json& j) { return j["graph_module"]["graph"]; }

// The node of flux-tiny's first block that projects the image tokens to queries
// (`transformer_blocks.0.attn.to_q`, node 146 `linear_10`), found by name so a re-exported
// fixture that moves it fails here, not silently.
Json& ToQ(Json& j) {
  for (Json& n : GraphOf(j)["nodes"]) {
    if (n["name"] == "linear_10") return n;
  }
  throw std::runtime_error("flux-tiny has no node linear_10");
}

std::string ErrorAfter(const std::function<void(Json&)>& edit) {
  Json j = FluxModel();
  edit(j);
  try {
    ParseProgramJson(j.dump(), kWhere);
  } catch (const ProgramError& e) {
    return e.what();
  }
  return "(no error)";
}

// Renames the first read of `value` by a node (which node reads it first is returned).
std::string RenameFirstRead(Json& j, const std::string& value, const std::string& to) {
  for (Json& n : GraphOf(j)["nodes"]) {
    for (Json& in : n["inputs"]) {
      Json& arg = in["arg"];
      if (arg.contains("as_tensor") && arg["as_tensor"]["name"] == value) {
        arg["as_tensor"]["name"] = to;
        return n["name"];
      }
    }
  }
  throw std::runtime_error("nothing reads " + value);
}

TEST(ValidateProgramTest, TheFixtureIsWellFormed) {
  EXPECT_EQ(ErrorAfter([](Json&) {}), "(no error)");
  ASSERT_EQ(ToQ(const_cast<Json&>(FluxModel()))["target"], "torch.ops.aten.linear.default");
}

TEST(ValidateProgramTest, ReadOfAnUndefinedValue) {
  EXPECT_EQ(ErrorAfter([](Json& j) { EXPECT_EQ(RenameFirstRead(j, "linear_10", "nosuch_value"), "unflatten"); }),
            std::string(kWhere) +
                ": node 152 (`unflatten`, torch.ops.aten.unflatten.int) reads `nosuch_value` (input `self`), which no "
                "graph input or node defines: the program is malformed");
}

TEST(ValidateProgramTest, ReadBeforeDefinitionIsACycle) {
  EXPECT_EQ(ErrorAfter([](Json& j) {
              Json& nodes = GraphOf(j)["nodes"];
              // Move `linear_10` after its first reader.
              for (size_t i = 0; i < nodes.size(); ++i) {
                if (nodes[i]["name"] == "linear_10") {
                  Json moved = nodes[i];
                  nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i));
                  nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(i + 6), moved);
                  break;
                }
              }
            }),
            std::string(kWhere) +
                ": node 151 (`unflatten`, torch.ops.aten.unflatten.int) reads `linear_10` (input `self`) before node "
                "152 (`linear_10`, torch.ops.aten.linear.default) defines it (a cycle, or nodes out of order): the "
                "program is malformed");
}

TEST(ValidateProgramTest, ValueDefinedTwice) {
  EXPECT_EQ(ErrorAfter([](Json& j) {
              for (Json& n : GraphOf(j)["nodes"]) {
                if (n["name"] == "linear_8") n["outputs"][0]["as_tensor"]["name"] = "linear_10";
              }
            }),
            std::string(kWhere) +
                ": node 146 (`linear_10`, torch.ops.aten.linear.default) defines `linear_10`, which node 125 "
                "(`linear_8`, torch.ops.aten.linear.default) already defines: the program is malformed");
}

TEST(ValidateProgramTest, GraphInputDefinedTwice) {
  EXPECT_EQ(ErrorAfter([](Json& j) {
              Json& inputs = GraphOf(j)["inputs"];
              inputs[1] = inputs[0];
              j["graph_module"]["signature"]["input_specs"][1] = j["graph_module"]["signature"]["input_specs"][0];
            }),
            std::string(kWhere) + ": graph input defines `" +
                FluxModel()["graph_module"]["graph"]["inputs"][0]["as_tensor"]["name"].get<std::string>() +
                "`, which a graph input already defines: the program is malformed");
}

TEST(ValidateProgramTest, UndefinedGraphOutput) {
  EXPECT_EQ(ErrorAfter([](Json& j) { GraphOf(j)["outputs"][0]["as_tensor"]["name"] = "nosuch_out"; }),
            std::string(kWhere) +
                ": graph output 0 is `nosuch_out`, which no graph input or node defines: the program is malformed");
}

TEST(ValidateProgramTest, TensorWithoutMetadata) {
  EXPECT_EQ(ErrorAfter([](Json& j) { GraphOf(j)["tensor_values"].erase("linear_10"); }),
            std::string(kWhere) +
                ": tensor `linear_10` (output of node 146 (`linear_10`, torch.ops.aten.linear.default)) has no "
                "recorded sizes and dtype: the program is malformed");
}

TEST(ValidateProgramTest, UnknownDtypeNegativeSizeAndStrideCount) {
  EXPECT_EQ(ErrorAfter([](Json& j) { GraphOf(j)["tensor_values"]["linear_10"]["dtype"] = 99; }),
            std::string(kWhere) +
                ": tensor `linear_10` (output of node 146 (`linear_10`, torch.ops.aten.linear.default)) has dtype 99, "
                "which is no dtype of the export schema: the program is malformed");
  EXPECT_EQ(ErrorAfter([](Json& j) { GraphOf(j)["tensor_values"]["linear_10"]["sizes"][2] = {{"as_int", -5}}; }),
            std::string(kWhere) +
                ": tensor `linear_10` (output of node 146 (`linear_10`, torch.ops.aten.linear.default)) has size -5 "
                "in dim 2: the program is malformed");
  EXPECT_EQ(ErrorAfter([](Json& j) { GraphOf(j)["tensor_values"]["linear_10"]["strides"].erase(0); }),
            std::string(kWhere) +
                ": tensor `linear_10` (output of node 146 (`linear_10`, torch.ops.aten.linear.default)) has 3 sizes "
                "but 2 strides: the program is malformed");
}

TEST(ValidateProgramTest, ParameterSizesThatOverflow) {
  const std::string error = ErrorAfter([](Json& j) {
    Json& sizes = GraphOf(j)["tensor_values"]["p_transformer_blocks_0_attn_to_q_weight"]["sizes"];
    sizes = Json::array({{{"as_int", int64_t{1} << 40}}, {{"as_int", int64_t{1} << 40}}});
  });
  EXPECT_EQ(error, std::string(kWhere) +
                       ": tensor `p_transformer_blocks_0_attn_to_q_weight` (graph input) has sizes [1099511627776, "
                       "1099511627776]: more than 2^63 elements: the program is malformed");
}

// Sizes that disagree with the operator: what made `weft check` blame the TP plan before.
TEST(ValidateProgramTest, LinearOutputSizesDisagreeWithItsInputs) {
  const std::string tail = "`add_3` [s2, s87, 64], `p_transformer_blocks_0_attn_to_q_weight` [64, 64] give [s2, s87, 64]: "
                           "the program is malformed";
  const std::string head = std::string(kWhere) + ": node 146 (`linear_10`, torch.ops.aten.linear.default): its output "
                                                 "`linear_10` is recorded as ";
  EXPECT_EQ(ErrorAfter([](Json& j) { GraphOf(j)["tensor_values"]["linear_10"]["sizes"][2]["as_int"] = 63; }),
            head + "[s2, s87, 63], but " + tail);
  EXPECT_EQ(ErrorAfter([](Json& j) {
              Json& m = GraphOf(j)["tensor_values"]["linear_10"];
              m["sizes"].erase(2);
              m["strides"].erase(2);
            }),
            head + "[s2, s87], but " + tail);
}

TEST(ValidateProgramTest, ElementwiseAndViewSizesDisagree) {
  // `silu` of the time embedding: the same sizes as its input.
  const std::string silu = ErrorAfter([](Json& j) {
    for (Json& n : GraphOf(j)["nodes"]) {
      if (n["name"] == "silu") {
        const std::string out = n["outputs"][0]["as_tensor"]["name"];
        GraphOf(j)["tensor_values"][out]["sizes"][1]["as_int"] = 7;
      }
    }
  });
  EXPECT_EQ(silu, std::string(kWhere) +
                      ": node 32 (`silu`, torch.ops.aten.silu.default): its output `silu` is recorded as [s2, 7], but "
                      "`linear_1` [s2, 64] give 64 in dim 1: the program is malformed");
  // A reshape whose recorded sizes disagree with its shape argument.
  const std::string view = ErrorAfter([](Json& j) {
    for (Json& n : GraphOf(j)["nodes"]) {
      if (n["target"] == "torch.ops.aten.reshape.default") {
        const std::string out = n["outputs"][0]["as_tensor"]["name"];
        for (Json& s : GraphOf(j)["tensor_values"][out]["sizes"]) {
          if (s.contains("as_int") && s["as_int"].get<int64_t>() > 1) {
            s["as_int"] = s["as_int"].get<int64_t>() + 1;
            return;
          }
        }
      }
    }
  });
  EXPECT_EQ(view, std::string(kWhere) +
                      ": node 176 (`reshape`, torch.ops.aten.reshape.default): its output `reshape` is recorded as "
                      "[s2, s31 + s87, 5, 8, 2], but its `shape` argument gives 4 in dim 2: the program is malformed");
}

}  // namespace
}  // namespace weft::program
