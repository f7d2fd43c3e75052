#pragma once

// Shared-memory transport for the CPU collectives of one process group whose ranks all run on
// this host (the usual CPU case: `weft-run --nproc N`, or torchrun/srun with N ranks per node).
//
// Why: Gloo moves every CPU collective over loopback TCP through two helper threads per rank
// (its worker and the transport's event loop). With one rank per core those threads fight
// the compute threads for the cores; a Flux ulysses=2 forward spent 42 ms of 360 in Gloo
// all-to-alls of 1.3 MB whose bare transfer takes ~0.7 ms. Here the calling thread copies
// each piece straight into a segment every rank has mapped and the receiver copies it out:
// no syscalls on the data path, no helper threads, and the copies read and write the
// callers' strided tensors directly (no packing before or unpacking after the exchange).
//
// Layout: one POSIX shm segment per group. For every ordered pair (i -> j, i != j) a
// single-producer single-consumer channel of two slots of `piece_bytes` each. A message larger
// than a slot streams through in pieces, so any size works with bounded memory
// (2 n (n-1) piece_bytes in all). Waiting spins briefly, then sleeps on a futex in the
// segment that senders and receivers ring after every piece.
//
// Failure: a peer that exited (its pid, from Create's table, is gone) while this rank still needs it, a message whose
// byte count differs from what this rank expects (shapes that disagree between ranks), or the
// timeout: Exchange throws ShmError naming the peer; the transport is unusable afterwards.
//
// Not used for DistContext::SendRecv (ring's p2p rotation): its point is that the transfer runs
// while the caller computes, and on the CPU that needs a helper thread to do the copying, which
// is what Gloo already has; the blocking collectives gain because nothing runs beside them.
//
// c10d appears here only for the rendezvous (c10d::Store); DistContext owns the instances.

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace weft::dist {

class ShmError : public std::runtime_error {
 public:
  // `peers`: the group ranks the failure is about (gone, silent, or sending the wrong size).
  explicit ShmError(const std::string& message, std::vector<int> peers = {})
      : std::runtime_error(message), peers_(std::move(peers)) {}
  const std::vector<int>& peers() const { return peers_; }

 private:
  std::vector<int> peers_;
};

class ShmTransport {
 public:
  // Collective over the `size` ranks that share `store` (keys go under "shm/"); call it on
  // every rank, also with budget_bytes 0 (off), so that ranks configured differently agree
  // instead of waiting for each other. `pids`: every group rank's process id, 0 for a rank on
  // another host (DistContext exchanges them once for all groups); the waits use them to see
  // a peer that died. Every rank publishes `budget_bytes`; when every budget > 0 and every rank
  // is on this host, group rank 0 creates the segment (sized from the smallest budget,
  // reserved with posix_fallocate so a full /dev/shm fails here and not later with SIGBUS),
  // the others map it, and all agree through the store that it worked. Otherwise every rank of
  // the group returns null and *why_not says why (all ranks decide alike, so a group never
  // mixes transports). Throws ShmError only when the store itself fails.
  // `spin`: how long a waiting rank polls before it sleeps on the futex; polling answers in
  // well under a microsecond instead of a wake-up, but steals the core from a rank that shares
  // it, so pass zero when the host has fewer cores than busy threads.
  static std::unique_ptr<ShmTransport> Create(c10d::Store& store, int rank, int size, int64_t budget_bytes,
                                              std::chrono::milliseconds timeout, std::chrono::microseconds spin,
                                              const std::vector<int>& pids, std::string* why_not);
  ~ShmTransport();
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  // The all-to-all every collective is built from: send[j] goes to group rank j and lands in
  // that rank's recv[me]; recv[j] (preallocated, any strides) receives what rank j sent here.
  // A sender's tensor and its receiver's buffer must have the same number of bytes, and
  // elements travel in row-major order of each side's own shape. send[me] is copied into
  // recv[me] locally. Undefined tensors count as zero bytes. Blocks until this rank has sent
  // and received everything.
  void Exchange(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& recv);

  int64_t piece_bytes() const;

  struct Segment;  // internal

 private:
  ShmTransport(std::unique_ptr<Segment> segment, int rank, int size, std::chrono::milliseconds timeout,
               std::chrono::microseconds spin, std::vector<int> pids);
  std::unique_ptr<Segment> seg_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::chrono::microseconds spin_;
  std::vector<int> pids_;           // per group rank
  std::vector<uint64_t> sent_;      // pieces published on channel me -> j
  std::vector<uint64_t> received_;  // pieces consumed on channel j -> me
  bool broken_ = false;
};

// A segment's name exists only while its group rendezvouses (group rank 0 drops it once every
// rank has mapped it). A rank 0 killed inside that window leaves the name in /dev/shm; group
// rank 0 of every later group removes such names ("weft-<pid>-...") whose creator is gone and
// that are older than a minute. Exposed for tests.
void RemoveStaleShmSegments();

// The piece size Create uses for `size` ranks and a budget: the budget split over the
// 2 n (n-1) slots, at most 1 MiB (the Ulysses messages of a small Flux, 0.65 MB, fit in one;
// larger messages pay one handshake per MiB, small next to copying a MiB), at least 64 KiB,
// a multiple of 4 KiB.
int64_t ShmPieceBytes(int size, int64_t budget_bytes);

}  // namespace weft::dist
