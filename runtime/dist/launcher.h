#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace weft::dist {

// Spawns `nproc` local ranks of one command on loopback, like a minimal torchrun.
struct LaunchOptions {
  int nproc = 1;
  std::vector<std::string> argv;  // program (absolute path or found on PATH) and arguments
  std::string master_addr = "127.0.0.1";
  int master_port = 0;            // 0: a free port (bind port 0)
  // With master_port 0: keep the chosen port reserved by a listening socket that rank 0
  // inherits, named by WEFT_MASTER_LISTEN_FD (weft programs serve the store on it, see
  // WorldFromEnv); no other process can take the port meanwhile. Only for commands that
  // understand it: another program would find the port busy.
  bool pass_listen_fd = false;
  // Intra-op threads per rank, exported as WEFT_THREADS and OMP_NUM_THREADS. 0: the
  // launcher's own WEFT_THREADS if set, else max(1, cores / nproc).
  int threads_per_rank = 0;
  // Prefix every line a rank prints with "[rank k] " (stdout to out, stderr to err).
  // Off: ranks inherit the launcher's stdout and stderr.
  bool prefix_output = true;
  // With prefix_output: rank 0's stdout goes to `out` byte for byte, unprefixed (output meant
  // for tools, e.g. one JSON document), and the other ranks' stdout lines go to `err` with their
  // prefix, so `out` holds exactly what rank 0 wrote.
  bool stdout_from_rank0 = false;
  // With prefix_output: every rank gets an error channel, a pipe named by WEFT_ERROR_FD, for its
  // last words (one message, possibly several lines, written before it exits non-zero). When
  // every rank has exited the launcher prints each distinct message once on `err`, prefixed
  // with the ranks that sent it ("[ranks 0-3] ", "[rank 2] "); messages that differ only in a
  // leading "rank <own rank>: " count as the same.
  bool error_channel = false;
  // After the first rank fails the others get this long to end by themselves (an error every
  // rank raises, a peer's death they detect) before they are stopped.
  std::chrono::milliseconds settle{std::chrono::seconds(1)};
  // After a rank fails, the others get SIGTERM, then SIGKILL after this grace period.
  std::chrono::milliseconds grace{std::chrono::seconds(3)};
  // When set, a rank is the forked launcher itself rather than a new image of argv: the child
  // takes the rank's environment, closes what exec would (every close-on-exec descriptor: the
  // other ranks' pipes) and exits with run_in_fork(), which must do what argv would (weft-run
  // passes its own main over argv). LibTorch's static initialisers (~0.8 s a process on this
  // 2-core machine, most of a small run) then run once, in the launcher, not once per rank. A
  // thread does not survive fork, so while the launcher runs more than one thread (a thread pool
  // some earlier work started) the ranks are started by exec as without it.
  std::function<int()> run_in_fork;
  // Extra environment for every rank, on top of the launcher's own.
  std::vector<std::pair<std::string, std::string>> env;
  std::ostream* out = nullptr;  // default std::cout
  std::ostream* err = nullptr;  // default std::cerr (also gets the launcher's reports)
};

struct LaunchResult {
  // 0 when every rank exited 0. Otherwise the first failing rank's exit code, or 128 + signal
  // when it was killed by a signal; 128 + signal also when the launcher itself got
  // SIGINT/SIGTERM (forwarded to every rank).
  int exit_code = 0;
  int failed_rank = -1;  // first rank that failed, -1 if none
  // "rank 2 exited with code 7" / "rank 1 was killed by signal 9 (Killed)"; empty on success.
  std::string failure;
};

// Sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, WEFT_THREADS
// and OMP_NUM_THREADS for each rank, starts them, forwards SIGINT/SIGTERM received by this
// process to every rank, and waits. A SIGINT/SIGTERM that arrives while ranks are still being
// started stops the starting: no further rank is started. When a rank exits non-zero or by a
// signal, reports it on `err` ("weft-run: rank 2 exited with code 7; stopping 3 other ranks"),
// stops the rest (after `settle`: SIGTERM, then SIGKILL after `grace`) and returns. Throws
// DistError if a rank cannot be started (fork failure) or the options are invalid (nproc < 1,
// empty argv).
LaunchResult Launch(const LaunchOptions& options);

// Absolute path of the running program (/proc/self/exe), or `fallback` when it cannot be read.
// The launcher executes it for every rank it does not fork; weft-run finds its data relative to it.
std::string SelfExecutable(const std::string& fallback);

}  // namespace weft::dist
