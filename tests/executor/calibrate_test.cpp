// `weft-run --calibrate` end to end: the quick calibration writes a profile the cost model reads,
// with every rate measured, and mistakes in its command line are one-line refusals.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "compiler/cost/machine_profile.h"

namespace {

const std::string kWeftRun = WEFT_RUN_PATH;

struct Shell {
  int status = -1;
  std::string output;
};

// Runs `command` with stderr merged into stdout, outside any rank environment.
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

std::string Temp(const std::string& name) { return ::testing::TempDir() + "/weft_calibrate_test_" + name; }

void ExpectRates(const std::vector<weft::cost::RatePoint>& points, const char* what) {
  EXPECT_FALSE(points.empty()) << what;
  for (const weft::cost::RatePoint& p : points) {
    EXPECT_TRUE(std::isfinite(p.rate) && p.rate > 0) << what << " " << p.dtype << " " << p.rate;
    EXPECT_TRUE(std::isfinite(p.size) && p.size > 0) << what << " " << p.dtype << " " << p.size;
  }
}

bool HasPoint(const std::vector<weft::cost::RatePoint>& points, const std::string& dtype, int threads) {
  for (const weft::cost::RatePoint& p : points) {
    if (p.dtype == dtype && p.threads == threads) return true;
  }
  return false;
}

TEST(WeftRunCalibrate, QuickProfileOnTwoRanksReadsBack) {
  const std::string file = Temp("machine.json");
  std::remove(file.c_str());
  const Shell s = Sh(kWeftRun + " --calibrate --quick --nproc 2 -o " + file);
  ASSERT_EQ(s.status, 0) << s.output;
  EXPECT_NE(s.output.find("matmul"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("wrote " + file), std::string::npos) << s.output;

  std::vector<std::string> warnings;
  const weft::cost::MachineProfile m = weft::cost::ReadMachineProfile(file, "cpu", &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  EXPECT_EQ(m.format, weft::cost::kMachineFormat);
  EXPECT_EQ(m.kind, "cpu");
  EXPECT_TRUE(m.measured);
  EXPECT_EQ(m.cores, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_NE(m.device.find(" cores"), std::string::npos) << m.device;
  EXPECT_EQ(m.source.rfind("weft-run --calibrate ", 0), 0u) << m.source;
  ExpectRates(m.matmul, "matmul");
  ExpectRates(m.attention, "attention");
  ExpectRates(m.elementwise, "elementwise");
  for (const char* dtype : {"f32", "bf16"}) {
    EXPECT_TRUE(HasPoint(m.matmul, dtype, 1)) << dtype;
    EXPECT_TRUE(HasPoint(m.attention, dtype, 1)) << dtype;
    EXPECT_TRUE(HasPoint(m.elementwise, dtype, 1)) << dtype;
  }
  EXPECT_GT(m.op_overhead_s, 0);
  EXPECT_LT(m.op_overhead_s, 1e-3);
  for (const char* transport : {"shm", "gloo"}) {
    for (const char* op : {"all_to_all", "all_gather", "all_reduce", "send_recv"}) {
      int lines = 0;
      for (const weft::cost::CollectiveFit& c : m.collectives) {
        if (c.transport != transport || c.op != op) continue;
        ++lines;
        EXPECT_EQ(c.ranks, 2) << transport << " " << op;
        EXPECT_TRUE(std::isfinite(c.alpha_s) && c.alpha_s >= 0) << transport << " " << op << " " << c.alpha_s;
        EXPECT_TRUE(std::isfinite(c.beta_bytes_per_s) && c.beta_bytes_per_s > 0)
            << transport << " " << op << " " << c.beta_bytes_per_s;
      }
      EXPECT_EQ(lines, 1) << transport << " " << op;
    }
  }
  EXPECT_GT(m.rank_base_bytes, 50'000'000);  // LibTorch alone takes more
  EXPECT_EQ(m.group_bytes.size(), 1u);
}

TEST(WeftRunCalibrate, RefusesCommandLineMistakesAtOnce) {
  Shell s = Sh(kWeftRun + " --calibrate");
  EXPECT_EQ(s.status, 2) << s.output;
  EXPECT_NE(s.output.find("--calibrate needs -o FILE"), std::string::npos) << s.output;

  s = Sh(kWeftRun + " --calibrate --smoke -o " + Temp("x.json"));
  EXPECT_EQ(s.status, 2) << s.output;
  EXPECT_NE(s.output.find("not with --smoke"), std::string::npos) << s.output;

  s = Sh(kWeftRun + " --calibrate --mesh ulysses=2 -o " + Temp("x.json"));
  EXPECT_EQ(s.status, 2) << s.output;
  EXPECT_NE(s.output.find("not with --mesh"), std::string::npos) << s.output;

  s = Sh(kWeftRun + " --calibrate -o /nonexistent-dir/machine.json");
  EXPECT_EQ(s.status, 2) << s.output;
  EXPECT_NE(s.output.find("-o /nonexistent-dir/machine.json: cannot write it"), std::string::npos) << s.output;

  s = Sh(kWeftRun + " -o " + Temp("x.json"));
  EXPECT_EQ(s.status, 2) << s.output;
  EXPECT_NE(s.output.find("--output"), std::string::npos) << s.output;
}

// --calibrate --device cuda measures GPU 0 and NCCL (bench/gpu/run.sh runs it where a GPU is lent);
// a build without CUDA says so before measuring anything and writes no profile.
TEST(WeftRunCalibrate, DeviceCudaNeedsACudaBuild) {
#ifdef WEFT_WITH_CUDA
  GTEST_SKIP() << "this build has CUDA";
#endif
  const std::string file = Temp("cuda.json");
  std::remove(file.c_str());
  const Shell s = Sh(kWeftRun + " --calibrate --device cuda --quick -o " + file);
  EXPECT_EQ(s.status, 2) << s.output;
  EXPECT_NE(s.output.find("--device cuda needs a build with CUDA (-DWEFT_ENABLE_CUDA=ON against a CUDA LibTorch)"),
            std::string::npos)
      << s.output;
  EXPECT_FALSE(std::ifstream(file).good()) << file;
}

}  // namespace
