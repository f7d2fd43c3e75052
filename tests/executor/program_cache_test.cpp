// The program cache (executor/program_cache.h): one export per model, reused; a tampered entry
// exported again, never run; two runs at once make one export; an unwritable cache falls back to a
// temporary export; a failed export names the reason and leaves no entry. The first four run a
// stand-in for the export tool (fake_export.sh: the tiny Flux fixture's program, after a second);
// the failed export runs the real one.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "executor/program_cache.h"
#include "compiler/program/program_reader.h"

namespace weft::exec {
namespace {

namespace fs = std::filesystem;

const std::string kConfigs = std::string(WEFT_SOURCE_DIR) + "/tools/model_configs";

// A fresh cache directory for one test, as $WEFT_PROGRAM_CACHE.
fs::path FreshCache(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("program_cache_test_" + name);
  fs::remove_all(dir);
  ::setenv("WEFT_PROGRAM_CACHE", dir.c_str(), 1);
  return dir;
}

// The export tool's stand-in, as the project's Python.
void FakeExporter() {
  ::setenv("WEFT_PYTHON", WEFT_FAKE_EXPORT, 1);
  ::setenv("WEFT_FAKE_EXPORT_PROGRAMS", (std::string(WEFT_SOURCE_DIR) + "/tests/fixtures/programs/flux-tiny").c_str(), 1);
}

ProgramSource FluxTiny() {
  ProgramSource s;
  s.config_file = kConfigs + "/flux-tiny.json";
  return s;
}

size_t Entries(const fs::path& dir, const std::string& suffix) {
  size_t n = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    n += name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  return n;
}

TEST(ProgramCache, ExportsOnceThenReusesAndReExportsATamperedEntry) {
  FakeExporter();
  const fs::path dir = FreshCache("reuse");
  const CachedProgram first = FindOrExportProgram(FluxTiny(), false);
  EXPECT_TRUE(first.exported);
  EXPECT_EQ(fs::path(first.path).parent_path(), dir);
  const program::Program p = program::ReadProgramFile(first.path);
  ASSERT_TRUE(p.manifest.has_value());
  EXPECT_EQ(p.manifest->class_name, "FluxTransformer2DModel");

  const CachedProgram again = FindOrExportProgram(FluxTiny(), false);
  EXPECT_FALSE(again.exported);
  EXPECT_EQ(again.path, first.path);

  // Another dtype is another entry.
  ProgramSource bf16 = FluxTiny();
  bf16.dtype = "bf16";
  const CachedProgram other = FindOrExportProgram(bf16, false);
  EXPECT_TRUE(other.exported);
  EXPECT_NE(other.path, first.path);

  // A byte changed: exported again, never run as it is.
  { std::ofstream(first.path, std::ios::binary | std::ios::app) << "x"; }
  const CachedProgram remade = FindOrExportProgram(FluxTiny(), false);
  EXPECT_TRUE(remade.exported);
  EXPECT_EQ(remade.path, first.path);
  EXPECT_NO_THROW(program::ReadProgramFile(remade.path));
  EXPECT_EQ(Entries(dir, ".pt2"), 2u);
  EXPECT_EQ(Entries(dir, ".log"), 0u);
}

TEST(ProgramCache, TwoRunsAtOnceMakeOneExport) {
  FakeExporter();
  const fs::path dir = FreshCache("concurrent");
  int exported = 0;
  pid_t children[2];
  for (pid_t& child : children) {
    child = ::fork();
    if (child == 0) {
      const CachedProgram c = FindOrExportProgram(FluxTiny(), false);
      ::_exit(c.exported ? 10 : 11);
    }
  }
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_TRUE(WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 11) << WEXITSTATUS(status);
    exported += WEXITSTATUS(status) == 10;
  }
  EXPECT_EQ(exported, 1);
  EXPECT_EQ(Entries(dir, ".pt2"), 1u);
  EXPECT_EQ(Entries(dir, ".pt2.sha256"), 1u);
}

TEST(ProgramCache, AnUnwritableCacheExportsForThisRunOnly) {
  FakeExporter();
  ::setenv("WEFT_PROGRAM_CACHE", "/dev/null/weft-programs", 1);  // under a file: never creatable
  ::testing::internal::CaptureStderr();
  const CachedProgram c = FindOrExportProgram(FluxTiny(), false);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(c.exported);
  EXPECT_NE(err.find("weft-run: the program cache /dev/null/weft-programs is not writable ("), std::string::npos) << err;
  EXPECT_NE(err.find("); exporting to "), std::string::npos) << err;
  EXPECT_NE(err.find(" for this run only"), std::string::npos) << err;
  EXPECT_NO_THROW(program::ReadProgramFile(c.path));
}

TEST(ProgramCache, AFailedExportNamesTheReasonAndLeavesNoEntry) {
  ::unsetenv("WEFT_PYTHON");  // the real tool, which names the class diffusers lacks
  const fs::path dir = FreshCache("failed");
  const fs::path config = fs::path(::testing::TempDir()) / "program_cache_test_no_such_class.json";
  {
    std::ifstream in(kConfigs + "/flux-tiny.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string from = "FluxTransformer2DModel";
    text.replace(text.find(from), from.size(), "WeftNoSuchTransformer");
    std::ofstream(config) << text;
  }
  ProgramSource s;
  s.config_file = config.string();
  try {
    FindOrExportProgram(s, false);
    FAIL() << "exported a class diffusers does not have";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("cannot export a program for " + config.string() + " (", 0), 0u) << what;
    EXPECT_NE(what.find("WeftNoSuchTransformer"), std::string::npos) << what;
  }
  EXPECT_EQ(Entries(dir, ".pt2"), 0u);
  EXPECT_EQ(Entries(dir, ".sha256"), 0u);
  EXPECT_EQ(Entries(dir, ".log"), 0u);
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace weft::exec
