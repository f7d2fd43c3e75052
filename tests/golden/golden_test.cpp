// One test per golden case under tests/golden/testdata/ (see golden_support.h for the
// format). Test names come from paths: testdata/parse/fail_unknown_style.weft ->
// Golden.parse_fail_unknown_style_weft.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/golden/golden_support.h"

namespace weft::golden {
namespace {

class GoldenCase : public testing::Test {
 public:
  explicit GoldenCase(std::string input) : input_(std::move(input)) {}

  void TestBody() override {
    const std::string expected_path = input_ + ".expected";
    const bool exists = std::filesystem::exists(expected_path);
    Expected expected = exists ? ParseExpected(ReadFile(expected_path)) : Expected{};
    if (!exists) expected.sections = {{"stderr", ""}, {"ast", ""}};
    const std::string phase = std::filesystem::path(input_).parent_path().filename().string();
    PhaseRunner runner = FindPhaseRunner(phase);
    ASSERT_NE(runner, nullptr) << "no golden runner for phase `" << phase << "` (testdata/" << phase
                               << "/); register one from tests/golden/" << phase
                               << "_phase_runner.cpp";
    std::map<std::string, std::string> actual = runner(input_, expected);

    const std::string name = std::filesystem::path(input_).filename().string();
    const std::string& stderr_text = actual["stderr"];
    // "file:line:col: error: ...", or "error: ..." for a diagnostic without a location.
    const bool has_error = stderr_text.find(": error: ") != std::string::npos ||
                           stderr_text.rfind("error: ", 0) == 0 || stderr_text.find("\nerror: ") != std::string::npos;
    EXPECT_EQ(name.rfind("fail_", 0) == 0, has_error)
        << name << ": files are named fail_* if and only if they produce an error";

    if (UpdateMode()) {
      for (auto& [section, body] : expected.sections) body = actual[section];
      ASSERT_TRUE(WriteFile(expected_path, FormatExpected(expected))) << expected_path;
      return;
    }
    ASSERT_TRUE(exists) << expected_path
                        << " is missing; run with WEFT_UPDATE_GOLDENS=1 to create it";
    for (const auto& [section, body] : expected.sections) {
      ASSERT_TRUE(actual.count(section)) << "unknown section `" << section << "` in " << expected_path;
      EXPECT_EQ(body, actual[section]) << "section `" << section << "` of " << expected_path
                                       << " differs (WEFT_UPDATE_GOLDENS=1 rewrites it)";
    }
  }

 private:
  std::string input_;
};

std::string TestName(const std::string& root, const std::string& path) {
  std::string name = std::filesystem::relative(path, root).string();
  for (char& c : name) {
    if (c == '/' || c == '.') c = '_';
  }
  return name;
}

// Registered before main() runs, from the files present at that time.
const bool kRegistered = [] {
  const std::string root = WEFT_GOLDEN_DIR;
  for (const std::string& input : ListFiles(root, {".weft", ".json"})) {
    testing::RegisterTest("Golden", TestName(root, input).c_str(), nullptr, nullptr, __FILE__,
                          __LINE__, [input]() -> testing::Test* { return new GoldenCase(input); });
  }
  return true;
}();

}  // namespace
}  // namespace weft::golden
