#include "tests/support/multi_rank.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/dist/world.h"

namespace weft::testing {
namespace {

using Clock = std::chrono::steady_clock;

int CountThreads() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    ::closedir(d);
  }
  return n;
}

// Failed gtest parts recorded since `first_part` in the current test (0 when not in a test).
int FailedPartsSince(int first_part) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return 0;
  const ::testing::TestResult* r = info->result();
  int failed = 0;
  for (int i = first_part; i < r->total_part_count(); ++i) {
    if (r->GetTestPartResult(i).failed()) ++failed;
  }
  return failed;
}

int PartCount() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info == nullptr ? 0 : info->result()->total_part_count();
}

[[noreturn]] void ChildMain(int rank, int world_size, int port, int listen_fd,
                            const dist::MeshShape& mesh, const RankBody& body,
                            MultiRankOptions options) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep output of a rank killed at the deadline
  if (rank == 0) {
    options.dist.master_listen_fd = listen_fd;
  } else if (listen_fd >= 0) {
    ::close(listen_fd);
  }
  int code = 0;
  try {
    dist::ConfigureIntraOpThreads(world_size, options.threads_per_rank);
    dist::WorldConfig world;
    world.rank = rank;
    world.world_size = world_size;
    world.local_rank = rank;
    world.local_world_size = world_size;
    world.master_addr = "127.0.0.1";
    world.master_port = port;
    std::unique_ptr<dist::DistContext> ctx;
    if (options.per_rank_dist) options.per_rank_dist(rank, options.dist);
    try {
      ctx = dist::DistContext::Create(world, mesh, options.dist);
    } catch (const std::exception& e) {
      std::cout << "rank " << rank << ": DistContext::Create failed: " << e.what() << std::endl;
      code = 2;
    }
    if (ctx) {
      const int first_part = PartCount();
      try {
        body(*ctx);
        if (FailedPartsSince(first_part) > 0) code = 1;
      } catch (const std::exception& e) {
        std::cout << "rank " << rank << ": body threw: " << e.what() << std::endl;
        code = 3;
      }
      // A rank whose body only failed an assertion still joins, so its peers pass; one whose
      // body threw (likely a broken group) does not.
      if ((code == 0 || code == 1) && options.final_barrier) {
        try {
          ctx->Barrier(dist::Axis::kWorld);
        } catch (const std::exception& e) {
          std::cout << "rank " << rank << ": final barrier failed: " << e.what() << std::endl;
          if (code == 0) code = 4;
        }
      }
    }
  } catch (const std::exception& e) {
    std::cout << "rank " << rank << ": " << e.what() << std::endl;
    code = 3;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  // No destructors: tearing down c10d objects after a failed peer can block.
  std::_Exit(code);
}

// A TCP socket listening on 127.0.0.1 at a port the kernel chose; -1 (and a port from
// FindFreePort) if that fails.
int ListenOnFreePort(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  socklen_t len = sizeof sa;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(fd, 128) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
    *port = ntohs(sa.sin_port);
    return fd;
  }
  if (fd >= 0) ::close(fd);
  *port = dist::FindFreePort();
  return -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

std::string RankOutcome::Status() const {
  if (killed_by_harness) return "killed by the harness (deadline or after a peer failed)";
  if (signal != 0) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  switch (exit_code) {
    case 0: return "passed";
    case 1: return "exit 1 (gtest failure in the body)";
    case 2: return "exit 2 (DistContext::Create failed)";
    case 3: return "exit 3 (exception)";
    case 4: return "exit 4 (final barrier failed)";
    default: return "exit " + std::to_string(exit_code);
  }
}

bool MultiRankResult::ok() const {
  for (const RankOutcome& r : ranks) {
    if (!r.ok()) return false;
  }
  return !ranks.empty();
}

std::string MultiRankResult::Summary(bool all_output) const {
  std::ostringstream os;
  os << ranks.size() << " ranks in " << seconds << " s:\n";
  for (const RankOutcome& r : ranks) os << "  rank " << r.rank << ": " << r.Status() << "\n";
  for (const RankOutcome& r : ranks) {
    if (r.ok() && !all_output) continue;
    os << "---- output of rank " << r.rank << " ----\n" << r.output;
    if (!r.output.empty() && r.output.back() != '\n') os << "\n";
  }
  return os.str();
}

MultiRankResult RunRanks(int world_size, const dist::MeshShape& mesh, const RankBody& body,
                         const MultiRankOptions& options) {
  MultiRankResult result;
  if (world_size < 1 || mesh.WorldSize() != world_size) {
    RankOutcome bad;
    bad.output = "RunRanks: mesh " + mesh.ToString() + " does not have " +
                 std::to_string(world_size) + " ranks\n";
    result.ranks.push_back(bad);
    return result;
  }
  if (int threads = CountThreads(); threads > 1) {
    std::cerr << "multi_rank: warning: the parent has " << threads
              << " threads before fork; run no torch ops outside the rank body\n";
  }
  const auto start = Clock::now();
  // Reserve the store's port by holding a listening socket that rank 0 inherits and serves
  // on: no other process can take the port between choosing and binding it.
  int port = 0;
  const int listen_fd = ListenOnFreePort(&port);
  std::vector<std::string> logs(world_size);
  std::vector<pid_t> pids(world_size, -1);
  result.ranks.resize(world_size);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  for (int r = 0; r < world_size; ++r) {
    char path[] = "/tmp/weft_rank_XXXXXX";
    int fd = ::mkstemp(path);
    if (fd < 0) {
      result.ranks[r].rank = r;
      result.ranks[r].output = std::string("mkstemp failed: ") + std::strerror(errno);
      continue;
    }
    logs[r] = path;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
      ChildMain(r, world_size, port, listen_fd, mesh, body, options);
    }
    ::close(fd);
    pids[r] = pid;
    result.ranks[r].rank = r;
    if (pid < 0) result.ranks[r].output = std::string("fork failed: ") + std::strerror(errno);
  }

  if (listen_fd >= 0) ::close(listen_fd);
  const auto grace = options.failure_grace.count() >= 0
                         ? options.failure_grace
                         : options.dist.timeout + std::chrono::milliseconds(2000);
  auto kill_at = start + options.deadline;
  int alive = 0;
  for (pid_t p : pids) alive += p > 0;
  bool failure_seen = false;
  while (alive > 0) {
    bool reaped = false;
    for (int r = 0; r < world_size; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      pid_t got = ::waitpid(pids[r], &status, WNOHANG);
      if (got != pids[r]) continue;
      reaped = true;
      pids[r] = -1;
      --alive;
      RankOutcome& o = result.ranks[r];
      if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
      if (!o.ok() && !failure_seen) {
        failure_seen = true;
        kill_at = std::min(kill_at, Clock::now() + grace);
      }
    }
    if (alive == 0) break;
    if (Clock::now() >= kill_at) {
      for (int r = 0; r < world_size; ++r) {
        if (pids[r] <= 0) continue;
        ::kill(pids[r], SIGKILL);
        int status = 0;
        ::waitpid(pids[r], &status, 0);
        result.ranks[r].killed_by_harness = true;
        result.ranks[r].signal = SIGKILL;
        pids[r] = -1;
      }
      break;
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  for (int r = 0; r < world_size; ++r) {
    if (logs[r].empty()) continue;
    result.ranks[r].output += ReadFile(logs[r]);
    ::unlink(logs[r].c_str());
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

MultiRankResult RunOnRanks(int world_size, const dist::MeshShape& mesh, const RankBody& body,
                           const MultiRankOptions& options) {
  MultiRankResult result = RunRanks(world_size, mesh, body, options);
  if (!result.ok()) ADD_FAILURE() << "multi-rank run over mesh " << mesh.ToString() << " failed\n"
                                  << result.Summary();
  return result;
}

MultiRankResult RunOnRanks(int world_size, const RankBody& body,
                           std::chrono::milliseconds collective_timeout) {
  dist::MeshShape mesh;
  mesh.ring = world_size;
  MultiRankOptions options;
  options.dist.timeout = collective_timeout;
  return RunOnRanks(world_size, mesh, body, options);
}

}  // namespace weft::testing
