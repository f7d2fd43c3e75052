#pragma once

// The collectives boundary of weft: one DistContext per process, holding the TCPStore, one
// c10d process group per mesh axis, and the call/byte counters. Code outside runtime/dist
// sees only this header (plus world.h, mesh.h, counters.h); c10d stays inside.
//
// Threading: a DistContext is used from one thread. Every collective is blocking unless it
// returns a handle (SendRecv). All ranks of a group must call the same collectives on that
// group in the same order with matching shapes (as in c10d). A mismatch that the wrappers
// cannot see locally (e.g. AllToAll inputs of different shapes on different ranks, or
// out_splits that disagree with what peers send) is a DistError naming the peer and both byte
// counts on the shared-memory transport; over Gloo it is undefined: Gloo may throw, or abort
// the process from its worker thread, and the peers then fail with DistError.
//
// Errors: every collective throws DistError (error.h) instead of hanging: when a peer has
// exited (the backend notices the closed connection, usually at once) or after
// DistOptions::timeout. The message names the rank, collective, axis, group ranks and
// shapes. After such an error the context is unusable; let the process exit.
//
// Devices: CPU tensors go through shared memory when every rank of the group runs on this
// host (shm_transport.h; DistOptions::shm_budget_bytes), else over Gloo; point-to-point
// SendRecv always uses Gloo. CUDA tensors go over NCCL when weft was built with
// WEFT_WITH_CUDA and DistOptions::enable_nccl is set; otherwise they are an error.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "runtime/dist/counters.h"
#include "runtime/dist/error.h"
#include "runtime/dist/mesh.h"
#include "runtime/dist/world.h"

namespace weft::dist {

// Applies DefaultThreadsPerRank(local_world_size) (or `threads` when > 0) to LibTorch's
// intra-op pool (at::set_num_threads). Call once per process, early, before tensor work.
void ConfigureIntraOpThreads(int local_world_size, int threads = 0);

struct DistOptions {
  // Limit for the rendezvous as a whole (one deadline over the store connect, every rank
  // arriving and the groups connecting) and for every collective.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // Also build an NCCL group per axis for CUDA tensors. Requires WEFT_WITH_CUDA builds;
  // DistContext::Create throws DistError when set without it.
  bool enable_nccl = false;
  // Rank 0 only: an already bound, listening TCP socket to serve the store on (its port must
  // be world.master_port), e.g. reserved by a parent process before forking ranks, so no other
  // process can take the port in between. -1: world.master_listen_fd, else rank 0 binds
  // master_port itself.
  int master_listen_fd = -1;
  // Shared memory for the CPU collectives of groups whose ranks share a host: the most
  // /dev/shm one group's segment may take (a group of n ranks takes 2 n (n-1) pieces of
  // ShmPieceBytes(n, budget), e.g. 4 MiB for 2 ranks, 24 MiB for 4). 0: Gloo only. A group
  // uses the smallest budget of its ranks and falls back to Gloo as a whole when any rank
  // cannot map the segment (CpuTransport says why).
  int64_t shm_budget_bytes = int64_t{32} << 20;
  // What this rank runs, as (field, value) pairs (weft-run: plan, graph, model, weights and
  // inputs identities, seed, mesh, mode flags ...). Every rank publishes its job at the
  // rendezvous; Create throws DistError on every rank when a rank's job differs from rank 0's,
  // naming that rank, its host and the first differing field, so a rank of another job (two
  // jobs on one MASTER_PORT) is refused before any collective. Empty on every rank: nothing to
  // compare.
  std::vector<std::pair<std::string, std::string>> job;
};

enum class ReduceKind { kSum, kMax, kMin };

// Completion handle of a SendRecv batch. Move-only.
class P2PHandle {
 public:
  P2PHandle();
  P2PHandle(P2PHandle&&) noexcept;
  P2PHandle& operator=(P2PHandle&&) noexcept;
  P2PHandle(const P2PHandle&) = delete;
  P2PHandle& operator=(const P2PHandle&) = delete;
  // Waits (ignoring errors) if Wait() was not called.
  ~P2PHandle();

  // Blocks until every send of the batch has left and every recv buffer is filled (at most
  // the context's timeout). Throws DistError naming the rank, axis, peer and shapes on
  // failure or timeout. Idempotent: later calls return at once.
  void Wait();
  // True once Wait() has returned.
  bool done() const;

  struct State;  // internal

 private:
  friend class DistContext;
  explicit P2PHandle(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class DistContext {
 public:
  // Connects to (rank 0: serves) the TCPStore at world.master_addr:master_port and creates
  // one process group for each axis of `mesh` that has size > 1 (groups of size 1 need
  // none: their collectives are local copies), each over its own PrefixStore
  // "weft/<axis>/<group index>/". Blocks until every rank has arrived or options.timeout.
  // Throws DistError: invalid world or mesh (mesh.WorldSize() != world.world_size), port in
  // use (rank 0), store unreachable, ranks missing (named), a second process claiming this
  // rank, a rank whose DistOptions::job differs from rank 0's.
  static std::unique_ptr<DistContext> Create(const WorldConfig& world, const MeshShape& mesh,
                                             const DistOptions& options = {});
  ~DistContext();
  DistContext(const DistContext&) = delete;
  DistContext& operator=(const DistContext&) = delete;

  int rank() const;
  int world_size() const;
  const WorldConfig& world() const;
  const Mesh& mesh() const;
  const DistOptions& options() const;
  // This rank's index in its group on `axis` (see Mesh::AxisRank) and the group's size.
  int AxisRank(Axis axis) const;
  int AxisSize(Axis axis) const;
  // Global ranks of this rank's group on `axis`, ordered by axis rank.
  const std::vector<int>& GroupRanks(Axis axis) const;
  // How CPU collectives on `axis` travel: "local" (group of one), "shm", or
  // "gloo (<why not shared memory>)".
  std::string CpuTransport(Axis axis) const;

  // Concatenation along `dim` (negative allowed) of every group member's `input`, in axis
  // rank order. All inputs must have the same shape and dtype. Returns a new tensor.
  at::Tensor AllGather(Axis axis, const at::Tensor& input, int64_t dim);
  // The same for flat tensors, into `out` (n x input's elements, contiguous; a buffer the caller
  // reuses). Safe to call from one thread of its own per axis (the weights' gathers, kWeights):
  // it records no counters and tells no observer -- the caller records what it moved.
  void AllGatherInto(Axis axis, const at::Tensor& input, at::Tensor& out);

  // One integer per rank, in axis rank order (an all-gather of one int64; counted as
  // kAllGatherSizes). Never cached: call it whenever sizes may have changed.
  std::vector<int64_t> AllGatherSizes(Axis axis, int64_t value);

  // As AllGather, but input.size(dim) may differ between ranks (0 allowed); all other dims
  // must agree. Exchanges the sizes with AllGatherSizes first (not cached).
  at::Tensor AllGatherUneven(Axis axis, const at::Tensor& input, int64_t dim);

  // Every rank's `input` must have the same shape (uneven lengths: use AllToAllSingle).
  // Splits `input` into AxisSize(axis) equal chunks along scatter_dim (size must divide:
  // DistError otherwise), sends chunk j to axis rank j, and concatenates the received chunks
  // along gather_dim in axis rank order. scatter_dim == gather_dim is allowed. E.g. Ulysses
  // with q (B, S/U, H, D): AllToAll(kUlysses, q, /*scatter*/2, /*gather*/1) -> (B, S, H/U, D).
  at::Tensor AllToAll(Axis axis, const at::Tensor& input, int64_t scatter_dim,
                      int64_t gather_dim);

  // all_to_all_single along dim 0. Both split lists empty: even split (input.size(0) must
  // divide by the group size). Otherwise both must be given, have AxisSize(axis) entries
  // each >= 0: in_splits[j] rows of `input` go to axis rank j (sum == input.size(0)), and
  // out_splits[j] rows arrive from axis rank j (the caller knows them, e.g. from
  // AllGatherSizes). Returns a tensor of sum(out_splits) rows.
  at::Tensor AllToAllSingle(Axis axis, const at::Tensor& input,
                            const std::vector<int64_t>& in_splits = {},
                            const std::vector<int64_t>& out_splits = {});

  // In-place all-reduce of `tensor` (must be contiguous) over the group.
  void AllReduce(Axis axis, at::Tensor& tensor, ReduceKind kind = ReduceKind::kSum);

  struct Send {
    at::Tensor tensor;  // must stay alive and unmodified until Wait()
    int dst;            // destination, as an axis rank
  };
  struct Recv {
    at::Tensor buffer;  // preallocated with the exact shape/dtype sent; filled by Wait()
    int src;            // source, as an axis rank
  };
  // Posts a batch of point-to-point sends and recvs on `axis` and returns at once, so the
  // caller can compute while the data moves (ring rotation). Matching rule: the k-th send to
  // peer p in this rank's i-th SendRecv call on this axis is matched with the k-th recv from
  // this rank in p's i-th SendRecv call on this axis, so every rank that takes part in a
  // rotation step calls SendRecv once per step (possibly with empty lists). Sending to self
  // is not allowed. Counted as one kSendRecv call with the bytes of the sends.
  P2PHandle SendRecv(Axis axis, std::vector<Send> sends, std::vector<Recv> recvs);

  // Blocks until every member of the group has called Barrier(axis).
  void Barrier(Axis axis);

  // Orderly end: every rank announces it is done through the store and waits (at most the
  // timeout) until all ranks have, so no rank closes its connections while a peer still
  // finishes its last collective, and the store server (rank 0) outlives every client.
  // Collective afterwards: undefined. Throws DistError on timeout. Idempotent; the destructor
  // calls it (ignoring errors) when it was not called, unless a collective failed (a peer may be
  // gone, and waiting for it would only add the timeout to the exit) or the context is destroyed
  // by an exception unwinding the rank (its peers may wait in a collective it never joins).
  void Shutdown();

  // Counters of every collective issued through this context (see counters.h).
  const CommCounters& counters() const;
  CommCounters& counters();

  // Called after every collective that reached the backend, with its axis, op name and when it
  // started and ended (weft-run's --trace draws them next to module calls). One observer; an
  // empty function removes it.
  using CollectiveObserver = std::function<void(Axis axis, const char* op, std::chrono::steady_clock::time_point start,
                                                std::chrono::steady_clock::time_point end)>;
  void SetCollectiveObserver(CollectiveObserver observer);

  struct Impl;  // internal

 private:
  explicit DistContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::dist
