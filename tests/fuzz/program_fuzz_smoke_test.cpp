// The program reader under a deterministic mutation fuzzer for WEFT_FUZZ_SECONDS (default 5 s):
// byte-level mutations of a fixture program's model.json, and structural ones (a field removed,
// a value replaced by one of another JSON type, an array cut short), each read with the
// contract of tests/fuzz/program_fuzz_target.h.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
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
  switch (rng() % 8) {
    case 0: return nullptr;
    case 1: return static_cast<int64_t>(rng());
    case 2: return -1;
    case 3: return "Symbol('s0') +";
    case 4: return nlohmann::json::array();
    case 5: return nlohmann::json::object();
    case 6: return 1e308;
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

}  // namespace
}  // namespace weft::fuzz
