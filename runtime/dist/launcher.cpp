#include "runtime/dist/launcher.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "runtime/dist/error.h"
#include "runtime/dist/world.h"

extern char** environ;

namespace weft::dist {
namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_pending_signal = 0;

void OnSignal(int sig) { g_pending_signal = sig; }

struct Stream {
  int fd = -1;
  std::string partial;
  std::ostream* sink = nullptr;  // null: the error channel, kept in Rank::error
  bool raw = false;              // written as is, no prefix (rank 0's stdout for tools)
};

struct Rank {
  pid_t pid = -1;
  bool exited = false;
  int status = 0;
  Stream streams[3];  // stdout, stderr, error channel
  std::string error;  // what arrived on the error channel
};

// "0-3", "0,2,5-7": ranks (sorted) as ranges.
std::string RankRanges(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return s;
}

// The error text with a leading "rank <rank>: " (after any "weft-run: error: ") removed, so
// that the same error raised by every rank reads the same.
std::string WithoutOwnRank(const std::string& text, int rank) {
  const std::string own = "rank " + std::to_string(rank) + ": ";
  for (const std::string& lead : {std::string("weft-run: error: "), std::string("weft-run: "), std::string()}) {
    if (text.compare(0, lead.size(), lead) == 0 && text.compare(lead.size(), own.size(), own) == 0) {
      return text.substr(0, lead.size()) + text.substr(lead.size() + own.size());
    }
  }
  return text;
}

// Each line of `text` (a trailing newline ignored) with `prefix`.
void PrintPrefixed(std::ostream& out, const std::string& prefix, const std::string& text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out << prefix;
    out.write(text.data() + start, static_cast<std::streamsize>(nl - start));
    out << "\n";
    start = nl + 1;
  }
}

// Every rank's last words, each distinct one once, with the ranks that sent it.
void PrintErrors(std::ostream& err, const std::vector<Rank>& ranks) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // normalized text -> ranks, in rank order
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].error.empty()) continue;
    const std::string key = WithoutOwnRank(ranks[r].error, static_cast<int>(r));
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.emplace_back(key, std::vector<int>{static_cast<int>(r)});
    } else {
      it->second.push_back(static_cast<int>(r));
    }
  }
  for (const auto& [key, who] : groups) {
    if (who.size() == 1) {
      PrintPrefixed(err, "[rank " + std::to_string(who[0]) + "] ", ranks[who[0]].error);
    } else {
      PrintPrefixed(err, "[ranks " + RankRanges(who) + "] ", key);
    }
  }
  err.flush();
}

std::string DescribeStatus(int rank, int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "rank " + std::to_string(rank) + " was killed by signal " + std::to_string(sig) + " (" +
           strsignal(sig) + ")";
  }
  return "rank " + std::to_string(rank) + " exited with code " + std::to_string(WEXITSTATUS(status));
}

bool Failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

// Writes complete lines with the rank prefix; keeps the tail for later. A raw stream is copied
// as is; the error channel collects into `error`.
void Emit(Stream& s, int rank, const char* data, size_t n, bool flush_tail, std::string& error) {
  if (s.sink == nullptr) {
    error.append(data, n);
    return;
  }
  if (s.raw) {
    s.sink->write(data, static_cast<std::streamsize>(n));
    s.sink->flush();
    return;
  }
  s.partial.append(data, n);
  size_t start = 0;
  while (true) {
    size_t nl = s.partial.find('\n', start);
    if (nl == std::string::npos) break;
    (*s.sink) << "[rank " << rank << "] ";
    s.sink->write(s.partial.data() + start, static_cast<std::streamsize>(nl + 1 - start));
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (flush_tail && !s.partial.empty()) {
    (*s.sink) << "[rank " << rank << "] " << s.partial << "\n";
    s.partial.clear();
  }
  s.sink->flush();
}

// Whether this process runs one thread (Linux: /proc/self/status), so that a fork leaves nothing
// half-held behind. Unknown counts as not.
bool SingleThreaded() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8) == 1;
  }
  return false;
}

// What exec does to descriptors, for a forked rank that does not exec: closes every one marked
// close-on-exec.
void CloseCloseOnExecDescriptors() {
  std::vector<int> fds;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(dir);
    while (dirent* e = ::readdir(dir)) {
      const int fd = std::atoi(e->d_name);
      if (e->d_name[0] != '.' && fd != own) fds.push_back(fd);
    }
    ::closedir(dir);
  }
  for (const int fd : fds) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) != 0) ::close(fd);
  }
}

// A forked rank: the rank's environment in place of the launcher's, then the command's own entry.
[[noreturn]] void RunForkedRank(const std::function<int()>& run, const std::vector<std::string>& env) {
  CloseCloseOnExecDescriptors();
  ::clearenv();
  for (const std::string& e : env) ::putenv(::strdup(e.c_str()));  // putenv keeps the pointer
  int code = 1;
  try {
    code = run();
  } catch (const std::exception& e) {
    std::cerr << "weft-run: error: " << e.what() << std::endl;
  }
  std::cout.flush();
  std::cerr.flush();
  std::exit(code);  // as returning from main: static destructors, stdio flushed
}

}  // namespace

LaunchResult Launch(const LaunchOptions& opt) {
  if (opt.nproc < 1) throw DistError("launcher: --nproc must be >= 1, got " + std::to_string(opt.nproc));
  if (opt.argv.empty()) throw DistError("launcher: no command to run");
  std::ostream& out = opt.out ? *opt.out : std::cout;
  std::ostream& err = opt.err ? *opt.err : std::cerr;
  int port = opt.master_port;
  int listen_fd = -1;
  if (port <= 0 && opt.pass_listen_fd) {
    // Not close-on-exec: rank 0 inherits it.
    listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    socklen_t len = sizeof sa;
    int one = 1;
    if (listen_fd < 0 || ::inet_pton(AF_INET, opt.master_addr.c_str(), &sa.sin_addr) != 1 ||
        ::setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(listen_fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(listen_fd, 512) != 0 ||
        ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      if (listen_fd >= 0) ::close(listen_fd);
      listen_fd = -1;
    } else {
      port = ntohs(sa.sin_port);
    }
  }
  if (port <= 0) port = FindFreePort(opt.master_addr);
  const int threads = opt.threads_per_rank > 0 ? opt.threads_per_rank : DefaultThreadsPerRank(opt.nproc);

  // Environment of every rank: ours minus the keys we set, plus them.
  std::set<std::string> ours = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                "MASTER_PORT", "WEFT_THREADS", "OMP_NUM_THREADS", "WEFT_MASTER_LISTEN_FD",
                                "WEFT_ERROR_FD"};
  for (const auto& kv : opt.env) ours.insert(kv.first);
  std::vector<std::string> base_env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    if (ours.count(entry.substr(0, entry.find('='))) == 0) base_env.push_back(entry);
  }
  for (const auto& kv : opt.env) base_env.push_back(kv.first + "=" + kv.second);
  base_env.push_back("WORLD_SIZE=" + std::to_string(opt.nproc));
  base_env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(opt.nproc));
  base_env.push_back("MASTER_ADDR=" + opt.master_addr);
  base_env.push_back("MASTER_PORT=" + std::to_string(port));
  base_env.push_back("WEFT_THREADS=" + std::to_string(threads));
  base_env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));

  std::vector<char*> argv;
  for (const std::string& a : opt.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  g_pending_signal = 0;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  out.flush();
  err.flush();
  std::fflush(nullptr);  // a forked rank would write the launcher's buffered bytes again
  const bool fork_only = opt.run_in_fork && SingleThreaded();
  std::vector<Rank> ranks(opt.nproc);
  for (Rank& rk : ranks) rk.exited = true;  // until started
  const bool channel = opt.prefix_output && opt.error_channel;
  int started = 0;
  for (int r = 0; r < opt.nproc; ++r) {
    // A SIGINT/SIGTERM while ranks start: start no more (the loop below forwards it).
    if (g_pending_signal != 0) break;
    int pipes[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
    if (opt.prefix_output) {
      for (int k = 0; k < (channel ? 3 : 2); ++k) {
        if (::pipe2(pipes[k], O_CLOEXEC) != 0) throw DistError(std::string("launcher: pipe: ") + std::strerror(errno));
      }
    }
    std::vector<std::string> env = base_env;
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("LOCAL_RANK=" + std::to_string(r));
    if (r == 0 && listen_fd >= 0) env.push_back("WEFT_MASTER_LISTEN_FD=" + std::to_string(listen_fd));
    if (channel) env.push_back("WEFT_ERROR_FD=" + std::to_string(pipes[2][1]));
    std::vector<char*> envp;
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) throw DistError(std::string("launcher: fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      if (r != 0 && listen_fd >= 0) ::close(listen_fd);
      if (opt.prefix_output) {
        ::dup2(pipes[0][1], 1);
        ::dup2(pipes[1][1], 2);
      }
      if (channel) ::fcntl(pipes[2][1], F_SETFD, 0);  // the error channel survives exec
      if (fork_only) RunForkedRank(opt.run_in_fork, env);
      ::execvpe(argv[0], argv.data(), envp.data());
      std::string msg = "weft-run: cannot start `" + opt.argv[0] + "`: " + std::strerror(errno) + "\n";
      ssize_t ignored = ::write(2, msg.data(), msg.size());
      (void)ignored;
      ::_exit(127);
    }
    ranks[r].pid = pid;
    ranks[r].exited = false;
    ++started;
    if (opt.prefix_output) {
      ::close(pipes[0][1]);
      ::close(pipes[1][1]);
      const bool raw = opt.stdout_from_rank0 && r == 0;
      ranks[r].streams[0] = Stream{pipes[0][0], "", opt.stdout_from_rank0 && r != 0 ? &err : &out, raw};
      ranks[r].streams[1] = Stream{pipes[1][0], "", &err, false};
      if (channel) {
        ::close(pipes[2][1]);
        ranks[r].streams[2] = Stream{pipes[2][0], "", nullptr, false};
      }
    }
  }

  if (listen_fd >= 0) ::close(listen_fd);  // rank 0 holds it now
  LaunchResult result;
  int alive = started;
  bool stopping = false;
  Clock::time_point term_at = Clock::time_point::max();
  Clock::time_point kill_at = Clock::time_point::max();
  auto stop_others = [&](int sig) {
    for (Rank& rk : ranks) {
      if (!rk.exited && rk.pid > 0) ::kill(rk.pid, sig);
    }
  };
  while (true) {
    // Output first, so a failing rank's last words precede the report.
    std::vector<pollfd> fds;
    std::vector<std::pair<int, int>> who;
    for (int r = 0; r < opt.nproc; ++r) {
      for (int s = 0; s < 3; ++s) {
        if (ranks[r].streams[s].fd >= 0) {
          fds.push_back({ranks[r].streams[s].fd, POLLIN, 0});
          who.emplace_back(r, s);
        }
      }
    }
    if (!fds.empty()) {
      int n = ::poll(fds.data(), fds.size(), alive > 0 ? 20 : 200);
      for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        Rank& owner = ranks[who[i].first];
        Stream& st = owner.streams[who[i].second];
        char buf[65536];
        ssize_t got = ::read(st.fd, buf, sizeof buf);
        if (got > 0) {
          Emit(st, who[i].first, buf, static_cast<size_t>(got), false, owner.error);
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          Emit(st, who[i].first, "", 0, true, owner.error);
          ::close(st.fd);
          st.fd = -1;
        }
      }
      if (n == 0 && alive == 0) {
        // Every rank is gone but something (a grandchild) keeps a pipe open: stop reading.
        for (Rank& rk : ranks) {
          for (Stream& st : rk.streams) {
            if (st.fd >= 0) {
              Emit(st, static_cast<int>(&rk - ranks.data()), "", 0, true, rk.error);
              ::close(st.fd);
              st.fd = -1;
            }
          }
        }
      }
    } else if (alive > 0) {
      ::usleep(10000);
    }
    if (int sig = g_pending_signal; sig != 0) {
      g_pending_signal = 0;
      if (!stopping || result.exit_code == 0) {
        err << "weft-run: got signal " << sig << " (" << strsignal(sig) << "); forwarding it to "
            << alive << " rank" << (alive == 1 ? "" : "s") << std::endl;
        result.exit_code = 128 + sig;
        result.failure = std::string("interrupted by signal ") + std::to_string(sig);
      }
      stop_others(sig);
      stopping = true;
      term_at = Clock::time_point::max();
      kill_at = std::min(kill_at, Clock::now() + opt.grace);
    }
    for (int r = 0; r < opt.nproc; ++r) {
      Rank& rk = ranks[r];
      if (rk.exited) continue;
      int status = 0;
      if (::waitpid(rk.pid, &status, WNOHANG) != rk.pid) continue;
      rk.exited = true;
      rk.status = status;
      --alive;
      if (Failed(status) && !stopping) {
        result.failed_rank = r;
        result.failure = DescribeStatus(r, status);
        result.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        err << "weft-run: " << result.failure;
        if (alive > 0) err << "; stopping " << alive << " other rank" << (alive == 1 ? "" : "s");
        err << std::endl;
        stopping = true;
        // The others may be about to end by themselves (the same error, or this rank's death
        // seen by a collective): their own last words say more than SIGTERM would.
        term_at = Clock::now() + opt.settle;
      }
    }
    if (alive > 0 && Clock::now() >= term_at) {
      stop_others(SIGTERM);
      term_at = Clock::time_point::max();
      kill_at = Clock::now() + opt.grace;
    }
    if (alive > 0 && Clock::now() >= kill_at) {
      err << "weft-run: " << alive << " rank" << (alive == 1 ? "" : "s")
          << " still running after the grace period; sending SIGKILL" << std::endl;
      stop_others(SIGKILL);
      kill_at = Clock::time_point::max();
    }
    bool open = false;
    for (Rank& rk : ranks) open = open || rk.streams[0].fd >= 0 || rk.streams[1].fd >= 0 || rk.streams[2].fd >= 0;
    if (alive == 0 && !open) break;
  }
  PrintErrors(err, ranks);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

std::string SelfExecutable(const std::string& fallback) {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return fallback;
  buf[n] = '\0';
  return buf;
}

}  // namespace weft::dist
