// World from the environment and the per-rank thread budget. Torch-free, single process.
#include "runtime/dist/world.h"


#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "runtime/dist/error.h"

namespace weft::dist {
namespace {

using Env = std::map<std::string, std::string>;

Env Good() {
  return {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"}};
}

// The DistError message of WorldFromEnv(env), or "ok".
std::string Error(const Env& env) {
  try {
    WorldFromEnv([&](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  } catch (const DistError& e) {
    return e.what();
  }
  return "ok";
}

TEST(WorldFromEnv, ReadsTorchrunVariables) {
  Env env = Good();
  env["LOCAL_WORLD_SIZE"] = "2";
  env["LOCAL_RANK"] = "1";
  WorldConfig w = WorldFromEnv([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.world_size, 4);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_world_size, 2);
  EXPECT_EQ(w.master_addr, "127.0.0.1");
  EXPECT_EQ(w.master_port, 29500);
  EXPECT_EQ(Error(Good()), "ok");
}

TEST(WorldFromEnv, MissingMasterPort) {
  Env env = Good();
  env.erase("MASTER_PORT");
  EXPECT_EQ(Error(env),
            "environment variable MASTER_PORT is not set; a distributed rank needs RANK, WORLD_SIZE, "
            "MASTER_ADDR and MASTER_PORT (set by torchrun or `weft-run --nproc N`; under srun, "
            "SLURM_PROCID and SLURM_NTASKS stand in for RANK and WORLD_SIZE)");
}

TEST(WorldFromEnv, RankNotBelowWorldSize) {
  Env env = Good();
  env["RANK"] = "4";
  env["LOCAL_RANK"] = "0";
  EXPECT_EQ(Error(env), "RANK=4 must be < WORLD_SIZE=4");
}

TEST(WorldFromEnv, NonNumericValues) {
  Env env = Good();
  env["RANK"] = "one";
  EXPECT_EQ(Error(env), "environment variable RANK=`one` is not a non-negative integer");
  env = Good();
  env["WORLD_SIZE"] = "4x";
  EXPECT_EQ(Error(env), "environment variable WORLD_SIZE=`4x` is not a non-negative integer");
  env = Good();
  env["MASTER_PORT"] = "-1";
  EXPECT_EQ(Error(env), "environment variable MASTER_PORT=`-1` is not a non-negative integer");
  env = Good();
  env["MASTER_PORT"] = "70000";
  EXPECT_EQ(Error(env), "environment variable MASTER_PORT=70000 is out of range 1..65535");
  env = Good();
  env["WORLD_SIZE"] = "0";
  EXPECT_EQ(Error(env), "environment variable WORLD_SIZE=0 is out of range 1..1048576");
  env = Good();
  env["LOCAL_RANK"] = "9";
  EXPECT_EQ(Error(env), "LOCAL_RANK=9 must be < LOCAL_WORLD_SIZE=4");
}

TEST(WorldFromEnv, SrunVariablesStandInForTorchrunOnes) {
  Env env = {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
             {"SLURM_NTASKS_PER_NODE", "4"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29400"}};
  WorldConfig w = WorldFromEnv([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.world_size, 8);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_world_size, 4);
  EXPECT_EQ(w.master_addr, "node0");
  env["SLURM_PROCID"] = "8";
  env["SLURM_LOCALID"] = "0";
  EXPECT_EQ(Error(env), "RANK=8 must be < WORLD_SIZE=8");
  env["SLURM_PROCID"] = "x";
  EXPECT_EQ(Error(env), "environment variable SLURM_PROCID=`x` is not a non-negative integer");
}

TEST(WorldFromEnv, InheritedListeningSocketOnRankZeroOnly) {
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  Env env = Good();
  env["WEFT_MASTER_LISTEN_FD"] = std::to_string(sock);
  auto world = [&]() {
    return WorldFromEnv([&](const char* n) -> const char* {
      auto it = env.find(n);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_EQ(world().master_listen_fd, -1);  // rank 1
  env["RANK"] = "0";
  env["LOCAL_RANK"] = "0";
  EXPECT_EQ(world().master_listen_fd, sock);
  ::close(sock);
  EXPECT_EQ(world().master_listen_fd, -1);  // not an open socket any more
}

TEST(WorldFromEnv, LaunchedAsRank) {
  Env env;
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_FALSE(LaunchedAsRank(get));
  env["SLURM_PROCID"] = "0";
  env["SLURM_NTASKS"] = "1";
  EXPECT_FALSE(LaunchedAsRank(get));  // a one-task srun step may still launch local ranks
  env["SLURM_NTASKS"] = "4";
  EXPECT_TRUE(LaunchedAsRank(get));
  env.clear();
  env["RANK"] = "0";
  EXPECT_TRUE(LaunchedAsRank(get));
}

TEST(Threads, DefaultIsCoresOverLocalRanksAndWeftThreadsOverrides) {
  ::unsetenv("WEFT_THREADS");
  EXPECT_GE(DefaultThreadsPerRank(1), 1);
  EXPECT_EQ(DefaultThreadsPerRank(100000), 1);
  ::setenv("WEFT_THREADS", "3", 1);
  EXPECT_EQ(DefaultThreadsPerRank(8), 3);
  ::setenv("WEFT_THREADS", "lots", 1);
  EXPECT_THROW(DefaultThreadsPerRank(8), DistError);
  ::unsetenv("WEFT_THREADS");
}

}  // namespace
}  // namespace weft::dist

namespace weft::dist {
namespace {

// A peer's death is seen at once, also while it is an unreaped zombie (kill(pid, 0) still
// succeeds then), and a live process is not mistaken for a dead one.
TEST(ProcessGone, LiveZombieAndReaped) {
  EXPECT_FALSE(ProcessGone(getpid()));
  EXPECT_FALSE(ProcessGone(0));
  const pid_t sleeper = fork();
  if (sleeper == 0) {
    pause();
    _exit(0);
  }
  EXPECT_FALSE(ProcessGone(sleeper));
  kill(sleeper, SIGKILL);
  // Not reaped yet: a zombie. Wait until the kernel has made it one.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ProcessGone(sleeper);
    if (!gone) usleep(5000);
  }
  EXPECT_TRUE(gone);
  EXPECT_EQ(kill(sleeper, 0), 0);  // what a plain liveness check would have believed
  waitpid(sleeper, nullptr, 0);
  EXPECT_TRUE(ProcessGone(sleeper));
}

}  // namespace
}  // namespace weft::dist
