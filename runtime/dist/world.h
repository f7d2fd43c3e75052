#pragma once

// Torch-free (library weft_dist_base): rank environment, thread budget, free ports.

#include <chrono>
#include <functional>
#include <string>

namespace weft::dist {

// Where this process sits in the job. Plain data: no sockets are opened by building one.
struct WorldConfig {
  int rank = 0;              // global rank, 0 <= rank < world_size
  int world_size = 1;        // number of ranks in the job
  int local_rank = 0;        // rank among the ranks of this host
  int local_world_size = 1;  // ranks on this host (sizes the intra-op thread pool)
  std::string master_addr = "127.0.0.1";  // host of the TCPStore server (rank 0 serves it)
  int master_port = 0;       // its port, 1..65535
  // Rank 0 only: an inherited socket already listening on master_port, to serve the store on
  // (WEFT_MASTER_LISTEN_FD, set by the launcher with LaunchOptions::pass_listen_fd). -1: none,
  // rank 0 binds master_port itself.
  int master_listen_fd = -1;
  // Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True): the agent already serves the store on
  // MASTER_PORT, so every rank, rank 0 too, connects to it as a client, and weft's keys live
  // under `store_prefix` ("weft-run/attempt_<TORCHELASTIC_RESTART_COUNT>/") so that a restarted
  // attempt never reads the keys of the one before.
  bool use_agent_store = false;
  std::string store_prefix;
};

// Reads the torchrun / weft-run environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
// (required), LOCAL_RANK (default: RANK), LOCAL_WORLD_SIZE (default: WORLD_SIZE). Under srun
// without RANK/WORLD_SIZE, SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID stand in for RANK,
// WORLD_SIZE and LOCAL_RANK (LOCAL_WORLD_SIZE then defaults to SLURM_NTASKS_PER_NODE when it
// is a plain number, else WORLD_SIZE); MASTER_ADDR and MASTER_PORT are still required. Throws
// DistError with a message naming the variable and its value when one is missing,
// non-numeric, out of range (port outside 1..65535, RANK >= WORLD_SIZE, WORLD_SIZE < 1,
// LOCAL_RANK >= LOCAL_WORLD_SIZE). On rank 0, WEFT_MASTER_LISTEN_FD (when it names an open
// socket) sets master_listen_fd. TORCHELASTIC_USE_AGENT_STORE=True (torchrun's workers) sets
// use_agent_store and store_prefix. `getenv` is injectable for tests.
WorldConfig WorldFromEnv();
WorldConfig WorldFromEnv(const std::function<const char*(const char*)>& getenv);

// True when RANK or WORLD_SIZE is set, or SLURM_PROCID is set with SLURM_NTASKS > 1: the
// process was started by a launcher (torchrun, srun, weft-run --nproc) and should join as the
// given rank.
bool LaunchedAsRank();
bool LaunchedAsRank(const std::function<const char*(const char*)>& getenv);

// Validates an explicit config with the same rules as WorldFromEnv; throws DistError.
void ValidateWorld(const WorldConfig& world);

// Intra-op threads for one rank: WEFT_THREADS if set (must be a positive integer, else
// DistError), otherwise max(1, hardware cores / local_world_size), so that N local ranks
// never oversubscribe the CPU.
int DefaultThreadsPerRank(int local_world_size);

// What identifies this host for shared memory and process liveness, e.g.
// "node7|4f1c...|net:4026531840|pid:4026531836|shm:23:1": the hostname, the kernel's boot id,
// the network and pid namespaces (inode numbers of /proc/self/ns/{net,pid}) and the /dev/shm
// file system (device:inode). Equal on two ranks exactly when they can share /dev/shm and see
// each other's pids. Containers, or network namespaces made into separate hosts on one kernel
// (tests/multihost), share the boot id but not the namespaces, so they count as different
// hosts even where their hostnames agree. Never contains a `|` in the hostname part.
std::string HostIdentity();

// This host's name (gethostname), for messages; "?" when unknown.
std::string HostName();

// True when process `pid` of this host has exited: no such process, or a zombie its parent has
// not reaped yet (kill(pid, 0) still succeeds on those). False for pid <= 0 (unknown).
bool ProcessGone(int pid);

// True when process `pid` of this host is stopped (SIGSTOP, SIGTSTP, a debugger): state T or t
// in /proc/<pid>/stat. False for pid <= 0, a running or a gone process.
bool ProcessStopped(int pid);

// Binds 127.0.0.1 (or `addr`) port 0, reads the port the kernel chose and closes the socket.
// Another process may take the port before it is used again; the window is small.
int FindFreePort(const std::string& addr = "127.0.0.1");

}  // namespace weft::dist
