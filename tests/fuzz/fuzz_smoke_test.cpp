// Bounded-time fuzzing under ctest: a deterministic mutation fuzzer (seeded from plans/ and
// the golden inputs) drives the same targets as the libFuzzer entry points for a fixed
// time each (WEFT_FUZZ_SECONDS, default 5 under ctest; WEFT_FUZZ_SEED picks the mutation
// sequence, default 12345). Long runs, minutes per target over several seeds, are
// tests/fuzz/run_smoke_long.sh. A property violation or an input that takes
// more than two seconds of CPU time (not wall time: the machine may be shared) fails the test and leaves the input in the working directory
// (fuzz-failure-*.weft|json) for a regression case. Crashes fail the test by themselves.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/plan_fuzz_targets.h"

namespace weft::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::vector<std::string> Seeds(const std::vector<std::string>& extensions) {
  std::vector<std::string> seeds;
  for (const char* dir : {WEFT_PLANS_DIR, WEFT_GOLDEN_PARSE_DIR}) {
    if (!std::filesystem::exists(dir)) continue;
    std::vector<std::string> paths;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      std::string path = entry.path().string();
      for (const std::string& ext : extensions) {
        if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) {
          paths.push_back(path);
        }
      }
    }
    std::sort(paths.begin(), paths.end());
    for (const std::string& path : paths) {
      std::ifstream in(path, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      seeds.push_back(text.str());
    }
  }
  return seeds;
}

// Tokens that make mutations reach deep into the grammar quickly.
const std::vector<std::string> kDictionary = {
    "plan", "for", "context_parallel", "tensor_parallel", "split", "gather", "attention",
    "output", "dim", "rank", "optional", "packed", "colwise", "rowwise", "replicate", "local",
    "{", "}", "[", "]", ",", "=", "\"", "'", "#", "\n", " ", "*", ".", "..", "{0..9}", "{a,b}",
    "\"\"", "0", "1", "99999999999", "-1", "\xff", "\xc3\xa9", ":", "\"weft_plan\": 1", "\"rules\": [",
    "\"items\": [", "{\"split\": \"\"", "\"argument\": \"x\"", "\"argument\": \"output\"", "\"dim\": 1", "null", "true", "\\u0000",
    // Comments whose text the DSL cannot hold as written (trailing blanks, a lone space),
    // byte order marks, tabs and escapes: the corners of round-trip idempotence.
    "\"comment\": \"x \", ", "\"comments\": [\" \", \"\\t\"], ", "# x \t", "\t", "\xEF\xBB\xBF", "\\u00a0", "\\ud800",
    "\"end_comments\": [\"e \"], ",
};

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  std::string Mutate(const std::string& input, const std::vector<std::string>& seeds) {
    std::string out = input;
    int rounds = 1 + Below(4);
    for (int r = 0; r < rounds; ++r) {
      switch (Below(7)) {
        case 0:  // flip a byte
          if (!out.empty()) out[Below(out.size())] = static_cast<char>(Below(256));
          break;
        case 1:  // insert a dictionary token
          out.insert(Below(out.size() + 1), kDictionary[Below(kDictionary.size())]);
          break;
        case 2: {  // delete a range
          if (out.empty()) break;
          size_t at = Below(out.size());
          out.erase(at, 1 + Below(std::min<size_t>(16, out.size() - at)));
          break;
        }
        case 3: {  // duplicate a range
          if (out.empty()) break;
          size_t at = Below(out.size());
          size_t n = 1 + Below(std::min<size_t>(64, out.size() - at));
          out.insert(Below(out.size() + 1), out.substr(at, n));
          break;
        }
        case 4: {  // splice with another seed
          const std::string& other = seeds[Below(seeds.size())];
          if (other.empty()) break;
          size_t from = Below(other.size());
          out = out.substr(0, Below(out.size() + 1)) + other.substr(from, Below(other.size() - from + 1));
          break;
        }
        case 5:  // truncate
          out.resize(Below(out.size() + 1));
          break;
        case 6: {  // replace a word with a dictionary token
          size_t at = out.find_first_of(" \n", Below(out.size() + 1));
          if (at == std::string::npos) break;
          size_t end = out.find_first_of(" \n", at + 1);
          out.replace(at + 1, end == std::string::npos ? std::string::npos : end - at - 1,
                      kDictionary[Below(kDictionary.size())]);
          break;
        }
      }
    }
    if (out.size() > 20000) out.resize(20000);
    return out;
  }

 private:
  size_t Below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  std::mt19937 rng_;
};

double BudgetSeconds() {
  const char* value = std::getenv("WEFT_FUZZ_SECONDS");
  return value ? std::atof(value) : 5.0;
}

uint32_t MutationSeed() {
  const char* value = std::getenv("WEFT_FUZZ_SEED");
  return value ? static_cast<uint32_t>(std::strtoul(value, nullptr, 10)) : 12345u;
}

void Fuzz(const char* ext, std::string (*check)(const uint8_t*, size_t),
          const std::vector<std::string>& extensions) {
  std::vector<std::string> seeds = Seeds(extensions);
  ASSERT_FALSE(seeds.empty());
  std::vector<std::string> corpus = seeds;
  Mutator mutator(MutationSeed());
  const auto started = Clock::now();
  const auto deadline = started + std::chrono::duration<double>(BudgetSeconds());
  size_t runs = 0;
  auto run_one = [&](const std::string& input) {
    double start = ThreadCpuSeconds();
    std::string failure = check(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    double seconds = ThreadCpuSeconds() - start;
    if (failure.empty() && seconds > 2.0) failure = "input took " + std::to_string(seconds) + " s of CPU";
    if (!failure.empty()) {
      std::printf("property violated after %zu inputs, %.1f s (seed %u)\n", runs,
                  std::chrono::duration<double>(Clock::now() - started).count(), MutationSeed());
      std::string path = "fuzz-failure-" + std::to_string(runs) + ext;
      std::ofstream(path, std::ios::binary) << input;
      ADD_FAILURE() << failure << "\n(input saved to " << std::filesystem::absolute(path) << ")";
      return false;
    }
    ++runs;
    return true;
  };
  for (const std::string& seed : seeds) ASSERT_TRUE(run_one(seed));
  while (Clock::now() < deadline) {
    std::string input = mutator.Mutate(corpus[runs % corpus.size()], seeds);
    if (!run_one(input)) return;
    // Keep some mutants as parents, so mutations compound.
    if (runs % 16 == 0 && corpus.size() < 4096) corpus.push_back(input);
  }
  testing::Test::RecordProperty("runs", static_cast<int>(runs));
  std::printf("%zu inputs in %.1f s (seed %u)\n", runs, BudgetSeconds(), MutationSeed());
}

TEST(FuzzSmoke, DslParser) { Fuzz(".weft", &CheckDslInput, {".weft"}); }
TEST(FuzzSmoke, JsonReader) { Fuzz(".json", &CheckJsonInput, {".json"}); }

}  // namespace
}  // namespace weft::fuzz
