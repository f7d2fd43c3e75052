// The program reader under a deterministic mutation fuzzer for WEFT_FUZZ_SECONDS (default 5 s):
// byte-level mutations of a fixture program's model.json, and structural ones (a field removed,
// a value replaced by one of another JSON type, an array cut short), each read with the
// contract of tests/fuzz/program_fuzz_target.h.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "compiler/program/archive.h"
#include "compiler/program/program_reader.h"
#include "tests/fuzz/program_fuzz_target.h"

namespace weft::fuzz {
namespace {

double Seconds() {
  const char* s = std::getenv("WEFT_FUZZ_SECONDS");
  return s != nullptr ? std::atof(s) : 5.0;
}

uint64_t Seed() {
  const char* s = std::getenv("WEFT_FUZZ_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : 1;
}

std::string ModelJson(const std::string& program) { return program::Archive::Open(program).Read("models/model.json"); }

nlohmann::json* RandomNode(nlohmann::json& root, std::mt19937_64& rng) {
  nlohmann::json* node = &root;
  for (int depth = 0; depth < 12; ++depth) {
    if (!(node->is_object() || node->is_array()) || node->empty() || rng() % 4 == 0) break;
    auto it = node->begin();
    std::advance(it, static_cast<long>(rng() % node->size()));
    node = &*it;
  }
  return node;
}

nlohmann::json RandomValue(std::mt19937_64& rng) {
  switch (rng() % 9) {
    case 0: return nullptr;
    case 1: return static_cast<int64_t>(rng());
    case 2: return -1;
    case 3: return "Symbol('s0') +";
    case 4: return nlohmann::json::array();
    case 5: return nlohmann::json::object();
    case 6: return 1e308;
    case 7: return std::string(300, '(') + "s0" + std::string(300, ')');
    default: return "x";
  }
}

TEST(ProgramFuzzSmoke, MutatedModelJsonIsReadOrRefused) {
  const std::string fixture = std::string(WEFT_FIXTURES) + "/programs/flux-tiny/program.pt2";
  const std::string base = ModelJson(fixture);
  const program::Program real = program::ReadProgramFile(fixture);
  const nlohmann::json parsed = nlohmann::json::parse(base);
  std::mt19937_64 rng(Seed());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(Seconds());
  size_t runs = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string input;
    if (rng() % 2 == 0) {
      input = base;
      const int edits = 1 + static_cast<int>(rng() % 8);
      for (int e = 0; e < edits && !input.empty(); ++e) {
        const size_t at = rng() % input.size();
        switch (rng() % 4) {
          case 0: input[at] = static_cast<char>(rng()); break;
          case 1: input.erase(at, 1 + rng() % 16); break;
          case 2: input.insert(at, std::string(1 + rng() % 3, "{}[],:\"0"[rng() % 8])); break;
          default: input.resize(at); break;
        }
      }
    } else {
      nlohmann::json j = parsed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        nlohmann::json* node = RandomNode(j, rng);
        if (node->is_object() && !node->empty() && rng() % 2 == 0) {
          auto it = node->begin();
          std::advance(it, static_cast<long>(rng() % node->size()));
          node->erase(it.key());
        } else if (node->is_array() && !node->empty() && rng() % 2 == 0) {
          node->erase(node->begin() + static_cast<long>(rng() % node->size()), node->end());
        } else {
          *node = RandomValue(rng);
        }
      }
      // Dataflow: a read or an output renamed to another value of the graph.
      nlohmann::json* nodes = nullptr;
      if (j.is_object() && j.contains("graph_module") && j["graph_module"].is_object() &&
          j["graph_module"].contains("graph") && j["graph_module"]["graph"].is_object() &&
          j["graph_module"]["graph"].contains("nodes")) {
        nodes = &j["graph_module"]["graph"]["nodes"];
      }
      if (rng() % 2 == 0 && nodes != nullptr && nodes->is_array() && nodes->size() > 1) {
        nlohmann::json& a = (*nodes)[rng() % nodes->size()];
        const nlohmann::json& b = (*nodes)[rng() % nodes->size()];
        if (!a.is_object() || !b.is_object()) continue;
        if (a.contains("outputs") && b.contains("outputs") && a["outputs"].is_array() && b["outputs"].is_array() &&
            !a["outputs"].empty() && !b["outputs"].empty()) {
          a["outputs"][0] = b["outputs"][0];
        }
      }
      if (rng() % 4 == 0 && j.is_object() && j.contains("guards_code") && j["guards_code"].is_array()) {
        j["guards_code"].push_back(rng() % 2 == 0 ? std::string(rng() % 600, '(') + "L['x'].size()[0] == 2"
                                                  : "L['hidden_states'].size()[" + std::to_string(rng() % 5) + "] " +
                                                        (rng() % 2 == 0 ? "==" : ">=") + " 2");
      }
      input = j.dump();
    }
    const std::string failure = CheckProgramJson(reinterpret_cast<const uint8_t*>(input.data()), input.size(),
                                                 rng() % 2 == 0 ? real.manifest : std::nullopt);
    ASSERT_EQ(failure, "") << "after " << runs << " runs (seed " << Seed() << ")";
    ++runs;
  }
  std::cout << runs << " mutated programs read or refused in " << Seconds() << " s\n";
  EXPECT_GT(runs, 10u);
}

// Byte-level mutations of a whole fixture archive (its zip headers, directory, compressed entries),
// read as weft reads a program file: each is read or refused with a ProgramError.
TEST(ProgramFuzzSmoke, MutatedArchiveIsReadOrRefused) {
  const std::string fixture = std::string(WEFT_FIXTURES) + "/programs/flux-tiny/program.pt2";
  std::string base;
  {
    std::FILE* f = std::fopen(fixture.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) base.append(buf, n);
    std::fclose(f);
  }
  const std::string scratch = ::testing::TempDir() + "/weft_program_fuzz_" + std::to_string(Seed()) + ".pt2";
  std::mt19937_64 rng(Seed() * 7919 + 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(Seconds());
  size_t runs = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string input = base;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits && !input.empty(); ++e) {
      // Most of an archive is its entries' data; the headers and the directory are at its ends.
      const size_t span = std::min<size_t>(input.size(), 4096);
      const size_t at = rng() % 3 == 0 ? rng() % input.size()
                        : rng() % 2 == 0 ? rng() % span : input.size() - 1 - rng() % span;
      switch (rng() % 4) {
        case 0: input[at] = static_cast<char>(rng()); break;
        case 1: input[at] = static_cast<char>(0xff); break;
        case 2: input.erase(at, 1 + rng() % 8); break;
        default: input.resize(at); break;
      }
    }
    const std::string failure = CheckProgramArchive(reinterpret_cast<const uint8_t*>(input.data()), input.size(), scratch);
    ASSERT_EQ(failure, "") << "after " << runs << " runs (seed " << Seed() << ")";
    ++runs;
  }
  std::remove(scratch.c_str());
  std::cout << runs << " mutated archives read or refused in " << Seconds() << " s\n";
  EXPECT_GT(runs, 5u);
}

}  // namespace
}  // namespace weft::fuzz
