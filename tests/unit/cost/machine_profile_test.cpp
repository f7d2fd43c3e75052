// Machine profiles (compiler/cost/machine_profile.h): the reader's refusals name the field, and
// RateAt / CollectiveAt read rates the way the cost model relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "compiler/cost/machine_profile.h"

namespace weft::cost {
namespace {

MachineProfile Minimal() {
  MachineProfile m;
  m.kind = "cpu";
  m.device = "Test CPU x2 cores";
  m.host = "testhost";
  m.source = "weft-run --calibrate 2026-12-04";
  m.cores = 2;
  m.rank_base_bytes = 250'000'000;
  m.group_bytes = {4'000'000, 9'000'000};
  m.matmul = {{"f32", 1, 1e6, 5e10}, {"f32", 2, 1e6, 9e10}, {"bf16", 1, 1e6, 8e10}};
  m.attention = {{"f32", 1, 1024, 3e10}};
  m.elementwise = {{"f32", 1, 3 * 1048576.0, 2e10}};
  m.op_overhead_s = 2e-6;
  m.collectives = {{"shm", "all_to_all", 2, 1e-5, 3e9}, {"gloo", "send_recv", 2, 5e-5, 1e9}};
  return m;
}

// The reader's message for `text`, "" when it accepts it.
std::string Refusal(const std::string& text) {
  try {
    ParseMachineProfile(text, "test.json");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// Minimal()'s JSON with `from` replaced by `to` (once; the test fails when `from` is not there).
std::string Edited(const std::string& from, const std::string& to) {
  std::string text = WriteMachineProfile(Minimal());
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in\n" << text;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(MachineProfile, RoundTripsThroughWriteAndParse) {
  const MachineProfile m = Minimal();
  const MachineProfile back = ParseMachineProfile(WriteMachineProfile(m), "test.json");
  EXPECT_EQ(back.format, kMachineFormat);
  EXPECT_EQ(back.kind, m.kind);
  EXPECT_EQ(back.device, m.device);
  EXPECT_EQ(back.host, m.host);
  EXPECT_TRUE(back.measured);
  EXPECT_EQ(back.source, m.source);
  EXPECT_EQ(back.cores, 2);
  EXPECT_EQ(back.rank_base_bytes, m.rank_base_bytes);
  EXPECT_EQ(back.group_bytes, m.group_bytes);
  ASSERT_EQ(back.matmul.size(), 3u);
  EXPECT_EQ(back.matmul[2].dtype, "bf16");
  EXPECT_EQ(back.matmul[1].threads, 2);
  EXPECT_DOUBLE_EQ(back.matmul[1].size, 1e6);
  EXPECT_DOUBLE_EQ(back.matmul[1].rate, 9e10);
  ASSERT_EQ(back.attention.size(), 1u);
  ASSERT_EQ(back.elementwise.size(), 1u);
  EXPECT_DOUBLE_EQ(back.op_overhead_s, 2e-6);
  ASSERT_EQ(back.collectives.size(), 2u);
  EXPECT_EQ(back.collectives[1].transport, "gloo");
  EXPECT_EQ(back.collectives[1].op, "send_recv");
  EXPECT_EQ(back.collectives[1].ranks, 2);
  EXPECT_DOUBLE_EQ(back.collectives[1].alpha_s, 5e-5);
  EXPECT_DOUBLE_EQ(back.collectives[1].beta_bytes_per_s, 1e9);
  EXPECT_FALSE(back.fitted.has_value());
  // Written again, it is the same text.
  EXPECT_EQ(WriteMachineProfile(back), WriteMachineProfile(m));
}

TEST(MachineProfile, RefusesAnotherFormatVersion) {
  const std::string why = Refusal(Edited("\"weft.machine/1\"", "\"weft.machine/2\""));
  EXPECT_NE(why.find("test.json"), std::string::npos) << why;
  EXPECT_NE(why.find("another weft version"), std::string::npos) << why;
}

TEST(MachineProfile, RefusesAMissingMatmulNamingIt) {
  const std::string why = Refusal(Edited("\"matmul\"", "\"not_matmul\""));
  EXPECT_NE(why.find("`compute.matmul`"), std::string::npos) << why;
}

TEST(MachineProfile, RefusesANegativeRateNamingTheField) {
  const std::string why = Refusal(Edited("50000000000.0", "-50000000000.0"));
  EXPECT_NE(why.find("`compute.matmul[0].rate`"), std::string::npos) << why;
}

TEST(MachineProfile, RefusesAnUnknownCollectiveOp) {
  const std::string why = Refusal(Edited("\"all_to_all\"", "\"all_to_some\""));
  EXPECT_NE(why.find("`collectives[0].op`"), std::string::npos) << why;
  EXPECT_NE(why.find("all_to_some"), std::string::npos) << why;
}

// A cpu profile of `cores` cores with f32 matmul points at 1 thread: rate 10 at size 1e3, 30 at
// size 1e5.
MachineProfile TwoSizes(int cores) {
  MachineProfile m = Minimal();
  m.cores = cores;
  m.matmul = {{"f32", 1, 1e3, 10}, {"f32", 1, 1e5, 30}};
  return m;
}

TEST(RateAt, InterpolatesLogLinearlyBetweenSizes) {
  const MachineProfile m = TwoSizes(4);
  EXPECT_DOUBLE_EQ(RateAt(m, m.matmul, "f32", 1e3, 1, 1), 10);
  EXPECT_NEAR(RateAt(m, m.matmul, "f32", 1e4, 1, 1), 20, 1e-9);  // halfway in log(size)
  EXPECT_NEAR(RateAt(m, m.matmul, "f32", std::pow(10, 4.5), 1, 1), 25, 1e-9);
}

TEST(RateAt, ClampsBeyondTheMeasuredSizes) {
  const MachineProfile m = TwoSizes(4);
  EXPECT_DOUBLE_EQ(RateAt(m, m.matmul, "f32", 10, 1, 1), 10);
  EXPECT_DOUBLE_EQ(RateAt(m, m.matmul, "f32", 1e12, 1, 1), 30);
}

TEST(RateAt, InterpolatesBetweenThreadCounts) {
  MachineProfile m = TwoSizes(4);
  m.matmul.push_back({"f32", 4, 1e3, 40});
  m.matmul.push_back({"f32", 4, 1e5, 120});
  EXPECT_NEAR(RateAt(m, m.matmul, "f32", 1e3, 2, 1), 20, 1e-9);  // a third of the way from 1 to 4 threads
  EXPECT_NEAR(RateAt(m, m.matmul, "f32", 1e4, 4, 1), 80, 1e-9);
  EXPECT_NEAR(RateAt(m, m.matmul, "f32", 1e3, 8, 1), 40 * 4.0 / 8, 1e-9);  // clamped, then oversubscribed
}

TEST(RateAt, ScalesDownWhenRanksOversubscribeTheCores) {
  const MachineProfile m = TwoSizes(2);
  // 4 ranks of 1 thread on 2 cores: each rank gets half of the 1-thread rate.
  EXPECT_DOUBLE_EQ(RateAt(m, m.matmul, "f32", 1e3, 1, 4), 5);
  EXPECT_DOUBLE_EQ(RateAt(m, m.matmul, "f32", 1e3, 1, 2), 10);  // 2 ranks fit
  MachineProfile gpu = m;
  gpu.kind = "cuda";
  EXPECT_DOUBLE_EQ(RateAt(gpu, gpu.matmul, "f32", 1e3, 1, 4), 10);  // a device per rank
}

TEST(RateAt, FallsBackToF32ForADtypeWithoutPoints) {
  MachineProfile m = TwoSizes(4);
  EXPECT_DOUBLE_EQ(RateAt(m, m.matmul, "bf16", 1e5, 1, 1), 30);
  m.matmul.push_back({"bf16", 1, 1e5, 70});
  EXPECT_DOUBLE_EQ(RateAt(m, m.matmul, "bf16", 1e5, 1, 1), 70);
  EXPECT_DOUBLE_EQ(RateAt(m, {}, "f32", 1e5, 1, 1), 0);
}

MachineProfile TwoGroups() {
  MachineProfile m = Minimal();
  m.collectives = {{"shm", "all_gather", 2, 1e-5, 2e9}, {"shm", "all_gather", 4, 3e-5, 1e9}};
  return m;
}

TEST(CollectiveAt, TakesTheExactGroupSize) {
  const std::optional<CollectiveTime> t = CollectiveAt(TwoGroups(), "shm", "all_gather", 4);
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->exact);
  EXPECT_DOUBLE_EQ(t->alpha_s, 3e-5);
  EXPECT_DOUBLE_EQ(t->beta_bytes_per_s, 1e9);
}

TEST(CollectiveAt, TakesTheNearestGroupSizeElse) {
  const std::optional<CollectiveTime> t = CollectiveAt(TwoGroups(), "shm", "all_gather", 8);
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->exact);
  EXPECT_DOUBLE_EQ(t->alpha_s, 3e-5);  // the 4-rank line
  const std::optional<CollectiveTime> small = CollectiveAt(TwoGroups(), "shm", "all_gather", 2);
  ASSERT_TRUE(small.has_value());
  EXPECT_TRUE(small->exact);
  EXPECT_DOUBLE_EQ(small->alpha_s, 1e-5);
  EXPECT_FALSE(CollectiveAt(TwoGroups(), "gloo", "all_gather", 2).has_value());
  EXPECT_FALSE(CollectiveAt(TwoGroups(), "shm", "all_reduce", 2).has_value());
}

}  // namespace
}  // namespace weft::cost
