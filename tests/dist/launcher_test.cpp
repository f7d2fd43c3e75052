// The local launcher (runtime/dist/launcher.h) and the weft-run binary.
#include "runtime/dist/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>

namespace weft::dist {
namespace {

using Clock = std::chrono::steady_clock;

struct Captured {
  LaunchResult result;
  std::string out, err;
  double seconds = 0;
};

Captured LaunchSh(int nproc, const std::string& script, std::chrono::milliseconds grace = std::chrono::seconds(3)) {
  std::ostringstream out, err;
  LaunchOptions o;
  o.nproc = nproc;
  o.argv = {"/bin/sh", "-c", script};
  o.grace = grace;
  o.out = &out;
  o.err = &err;
  auto start = Clock::now();
  Captured c;
  c.result = Launch(o);
  c.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  c.out = out.str();
  c.err = err.str();
  return c;
}

TEST(Launcher, SetsTheRankEnvironmentAndPrefixesOutput) {
  ::unsetenv("WEFT_THREADS");
  Captured c = LaunchSh(3, "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR\"; "
                      "echo \"port=$MASTER_PORT threads=$WEFT_THREADS omp=$OMP_NUM_THREADS\"; echo oops >&2");
  EXPECT_EQ(c.result.exit_code, 0) << c.err;
  EXPECT_EQ(c.result.failed_rank, -1);
  for (int r = 0; r < 3; ++r) {
    const std::string p = "[rank " + std::to_string(r) + "] ";
    EXPECT_NE(c.out.find(p + std::to_string(r) + " 3 " + std::to_string(r) + " 3 127.0.0.1\n"), std::string::npos)
        << c.out;
    EXPECT_NE(c.err.find(p + "oops\n"), std::string::npos) << c.err;
  }
  // One free port for all; threads = max(1, cores / 3) unless WEFT_THREADS says otherwise.
  const int threads = std::max(1u, std::thread::hardware_concurrency() / 3);
  const std::string tail = " threads=" + std::to_string(threads) + " omp=" + std::to_string(threads);
  size_t at = c.out.find("port=");
  ASSERT_NE(at, std::string::npos);
  const std::string port = c.out.substr(at + 5, c.out.find(' ', at) - at - 5);
  EXPECT_GT(std::stoi(port), 0);
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(c.out.find("[rank " + std::to_string(r) + "] port=" + port + tail), std::string::npos) << c.out;
  }
}

TEST(Launcher, ReservedPortIsInheritedByRankZeroOnly) {
  std::ostringstream out, err;
  LaunchOptions o;
  o.nproc = 2;
  o.pass_listen_fd = true;
  o.argv = {"/bin/sh", "-c",
            "if [ -n \"$WEFT_MASTER_LISTEN_FD\" ] && [ -e /proc/$$/fd/$WEFT_MASTER_LISTEN_FD ]; then "
            "echo fd open; else echo no fd; fi"};
  o.out = &out;
  o.err = &err;
  EXPECT_EQ(Launch(o).exit_code, 0) << err.str();
  EXPECT_NE(out.str().find("[rank 0] fd open"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("[rank 1] no fd"), std::string::npos) << out.str();
}

TEST(Launcher, WeftThreadsOverridesThePerRankDefault) {
  ::setenv("WEFT_THREADS", "5", 1);
  Captured c = LaunchSh(2, "echo t=$WEFT_THREADS");
  ::unsetenv("WEFT_THREADS");
  EXPECT_NE(c.out.find("[rank 1] t=5\n"), std::string::npos) << c.out;
}

TEST(Launcher, ReportsAFailingRanksExitCodeAndStopsTheOthers) {
  Captured c = LaunchSh(3, "if [ \"$RANK\" = 1 ]; then echo last words; exit 7; fi; exec sleep 30");
  EXPECT_EQ(c.result.exit_code, 7);
  EXPECT_EQ(c.result.failed_rank, 1);
  EXPECT_EQ(c.result.failure, "rank 1 exited with code 7");
  EXPECT_NE(c.err.find("weft-run: rank 1 exited with code 7; stopping 2 other ranks"), std::string::npos) << c.err;
  EXPECT_NE(c.out.find("[rank 1] last words"), std::string::npos) << c.out;
  EXPECT_LT(c.seconds, 10);
}

TEST(Launcher, ReportsARankKilledByASignal) {
  Captured c = LaunchSh(2, "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 30");
  EXPECT_EQ(c.result.exit_code, 128 + 9);
  EXPECT_EQ(c.result.failed_rank, 0);
  EXPECT_EQ(c.result.failure, "rank 0 was killed by signal 9 (Killed)");
  EXPECT_NE(c.err.find("weft-run: rank 0 was killed by signal 9 (Killed); stopping 1 other rank"), std::string::npos)
      << c.err;
  EXPECT_LT(c.seconds, 10);
}

TEST(Launcher, KillsRanksThatIgnoreSigtermAfterTheGracePeriod) {
  // Rank 1 fails only once rank 0 ignores SIGTERM (a marker file, keyed by the launcher's pid,
  // says so); otherwise a loaded machine may deliver the SIGTERM before the trap is set.
  Captured c = LaunchSh(2,
                        "m=/tmp/weft_launcher_test_trap_$PPID; "
                        "if [ \"$RANK\" = 1 ]; then while [ ! -e $m ]; do sleep 0.05; done; rm -f $m; exit 3; fi; "
                        "trap '' TERM; touch $m; sleep 30 & wait; sleep 30",
                        std::chrono::milliseconds(500));
  EXPECT_EQ(c.result.exit_code, 3);
  EXPECT_NE(c.err.find("still running after the grace period; sending SIGKILL"), std::string::npos) << c.err;
  EXPECT_LT(c.seconds, 10);
}

TEST(Launcher, ForwardsSigtermToEveryRank) {
  std::thread poke([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ::kill(::getpid(), SIGTERM);
  });
  Captured c = LaunchSh(2, "trap 'echo got TERM; exit 0' TERM; sleep 30 & wait");
  poke.join();
  EXPECT_EQ(c.result.exit_code, 128 + SIGTERM);
  EXPECT_NE(c.err.find("weft-run: got signal 15"), std::string::npos) << c.err;
  EXPECT_NE(c.out.find("[rank 0] got TERM"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("[rank 1] got TERM"), std::string::npos) << c.out;
  EXPECT_LT(c.seconds, 10);
}

// A SIGTERM while ranks are still being started stops the starting: rank 0 signals the
// launcher as soon as it runs, and far fewer than the 300 ranks asked for are ever started (the
// launcher used to start them all first, hundreds of processes for a job already cancelled).
TEST(Launcher, SigtermWhileRanksStartStartsNoMore) {
  Captured c = LaunchSh(300, "if [ \"$RANK\" = 0 ]; then kill -TERM $PPID; fi; exec sleep 30");
  EXPECT_EQ(c.result.exit_code, 128 + SIGTERM);
  const std::string got = "weft-run: got signal 15 (Terminated); forwarding it to ";
  const size_t at = c.err.find(got);
  ASSERT_NE(at, std::string::npos) << c.err;
  const int alive = std::atoi(c.err.c_str() + at + got.size());
  EXPECT_GE(alive, 1) << c.err;
  EXPECT_LT(alive, 300) << c.err;
  EXPECT_LT(c.seconds, 10);
}

TEST(Launcher, MissingProgramIsReported) {
  std::ostringstream out, err;
  LaunchOptions o;
  o.nproc = 1;
  o.argv = {"/nonexistent/weft-program"};
  o.out = &out;
  o.err = &err;
  LaunchResult r = Launch(o);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(err.str().find("cannot start `/nonexistent/weft-program`"), std::string::npos) << err.str();
}

// A rank forked without exec (weft-run's): its entry runs, not argv, on the rank's environment, with
// what exec would close closed, and its return value is the rank's exit code.
TEST(Launcher, ForkedRanksRunTheEntryOnTheirEnvironment) {
  int held[2];
  ASSERT_EQ(::pipe2(held, O_CLOEXEC), 0);
  std::ostringstream out, err;
  LaunchOptions o;
  o.nproc = 3;
  o.argv = {"/bin/sh", "-c", "echo argv executed"};
  o.env = {{"WEFT_LAUNCHER_TEST", "set"}};
  o.out = &out;
  o.err = &err;
  o.run_in_fork = [fd = held[0]] {
    const bool closed = ::fcntl(fd, F_GETFD) < 0 && errno == EBADF;
    std::printf("forked rank %s of %s, %s, close-on-exec descriptor %s\n", std::getenv("RANK"),
                std::getenv("WORLD_SIZE"), std::getenv("WEFT_LAUNCHER_TEST"), closed ? "closed" : "open");
    return std::atoi(std::getenv("RANK")) == 1 ? 3 : 0;
  };
  const LaunchResult r = Launch(o);
  ::close(held[0]);
  ::close(held[1]);
  EXPECT_EQ(r.exit_code, 3) << err.str();
  EXPECT_EQ(r.failed_rank, 1);
  EXPECT_EQ(out.str().find("argv executed"), std::string::npos) << out.str();
  for (int rank : {0, 1, 2}) {
    const std::string line = "[rank " + std::to_string(rank) + "] forked rank " + std::to_string(rank) +
                             " of 3, set, close-on-exec descriptor closed\n";
    EXPECT_NE(out.str().find(line), std::string::npos) << out.str();
  }
}

// A thread does not survive fork: while the launcher runs another, its ranks are argv, executed.
TEST(Launcher, ExecutesArgvWhileAnotherThreadRuns) {
  std::atomic<bool> stop{false};
  std::thread busy([&stop] {
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  std::ostringstream out, err;
  LaunchOptions o;
  o.nproc = 2;
  o.argv = {"/bin/sh", "-c", "echo exec"};
  o.out = &out;
  o.err = &err;
  o.run_in_fork = [] {
    std::printf("forked\n");
    return 0;
  };
  const LaunchResult r = Launch(o);
  stop = true;
  busy.join();
  EXPECT_EQ(r.exit_code, 0) << err.str();
  EXPECT_NE(out.str().find("[rank 0] exec\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("[rank 1] exec\n"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("forked"), std::string::npos) << out.str();
}

// weft-run itself.
struct Shell {
  int status = -1;
  std::string output;
};

Shell Sh(const std::string& command) {
  Shell s;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return s;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) s.output.append(buf.data(), n);
  int st = ::pclose(p);
  s.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return s;
}

const std::string kWeftRun = WEFT_RUN_PATH;

TEST(WeftRun, SmokeJobPasses) {
  Shell s = Sh("env -u RANK -u WORLD_SIZE " + kWeftRun + " --smoke");
  EXPECT_EQ(s.status, 0) << s.output;
  EXPECT_NE(s.output.find("[rank 0] weft-run smoke job: mesh ring=2,ulysses=2,tp=1 on 4 ranks"), std::string::npos)
      << s.output;
  EXPECT_NE(s.output.find("[rank 0] smoke job passed on every rank"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("ulysses  all_to_all             3 calls             64 bytes sent"), std::string::npos)
      << s.output;
}

TEST(WeftRun, SmokeJobOnThreeRanksWithAnotherOrder) {
  Shell s = Sh("env -u RANK -u WORLD_SIZE " + kWeftRun +
               " --smoke --nproc 3 --mesh ulysses=3 --mesh-order ulysses,ring,tp --timeout-ms 20000");
  EXPECT_EQ(s.status, 0) << s.output;
  EXPECT_NE(s.output.find("mesh ring=1,ulysses=3,tp=1,order=ulysses:ring:tp on 3 ranks"), std::string::npos)
      << s.output;
}

TEST(WeftRun, MeshAndNprocMustAgree) {
  Shell s = Sh("env -u RANK -u WORLD_SIZE " + kWeftRun + " --nproc 2 --mesh ring=3");
  EXPECT_EQ(s.status, 2) << s.output;
  EXPECT_NE(s.output.find("weft-run: --mesh ring=3,ulysses=1,tp=1 has 3 ranks but --nproc is 2"), std::string::npos)
      << s.output;
}

TEST(WeftRun, BadRankEnvironmentIsAClearError) {
  Shell s = Sh("env -u MASTER_PORT RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 " + kWeftRun);
  EXPECT_EQ(s.status, 1) << s.output;
  EXPECT_NE(s.output.find("weft-run: error: environment variable MASTER_PORT is not set"), std::string::npos)
      << s.output;
  s = Sh("env RANK=2 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 " + kWeftRun);
  EXPECT_NE(s.output.find("weft-run: error: RANK=2 must be < WORLD_SIZE=2"), std::string::npos) << s.output;
}

TEST(WeftRun, Version) {
  Shell s = Sh(kWeftRun + " --version");
  EXPECT_EQ(s.status, 0);
  EXPECT_EQ(s.output.rfind("weft-run 0.", 0), 0u) << s.output;
}

}  // namespace
}  // namespace weft::dist
