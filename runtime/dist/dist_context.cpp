#include "runtime/dist/dist_context.h"

#include "runtime/dist/shm_transport.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#ifdef WEFT_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace weft::dist {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ElapsedMs(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}

std::string Describe(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes() << " " << t.scalar_type();
  return os.str();
}

// The backend's own message, without c10's backtrace, on one line and bounded.
std::string BackendMessage(const std::exception& e) {
  std::string m;
  if (auto* ce = dynamic_cast<const c10::Error*>(&e)) {
    m = ce->what_without_backtrace();
  } else {
    m = e.what();
  }
  for (char& c : m) {
    if (c == '\n') c = ' ';
  }
  while (!m.empty() && (m.back() == ' ' || m.back() == '\t')) m.pop_back();
  if (m.size() > 600) m = m.substr(0, 600) + "...";
  return m;
}

int64_t Bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// (global rank, pid) of the peers that run on this host, as exchanged at creation.
using LocalPeers = std::vector<std::pair<int, int>>;

// "rank 3 (pid 4242) is no longer running" for each listed peer whose process is gone, so an
// error can say who died even where the backend's own message only names a socket. "" if none.
// A killed peer's sockets close before the kernel marks it exited, so a backend can report the
// closed connection a moment before the process looks gone: look for up to 100 ms.
std::string GonePeers(const LocalPeers& peers) {
  std::string gone;
  for (int attempt = 0; attempt < 10 && gone.empty() && !peers.empty(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (const auto& [rank, pid] : peers) {
      if (!ProcessGone(pid)) continue;
      gone += (gone.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank) + " (pid " +
              std::to_string(pid) + ")";
    }
  }
  return gone.empty() ? "" : gone + (gone.find(", ") == std::string::npos ? " is" : " are") + " no longer running";
}

// One process group and the state shared by the axes that map onto it.
struct Backend {
  std::vector<int> ranks;
  c10::intrusive_ptr<c10d::Backend> gloo;
  c10::intrusive_ptr<c10d::Backend> nccl;
  std::unique_ptr<ShmTransport> shm;  // CPU collectives when set
  std::string shm_why_not;
};

struct AxisGroup {
  std::vector<int> ranks;
  // The group's other members on this host, as (global rank, pid): named in errors when gone.
  std::shared_ptr<const LocalPeers> local_peers = std::make_shared<const LocalPeers>();
  int axis_rank = 0;
  std::shared_ptr<Backend> backend;  // null when the group has one rank
  uint32_t p2p_seq = 0;
};

}  // namespace

struct P2PHandle::State {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  std::vector<std::string> what;               // per work: "send [..] to axis rank 3"
  std::vector<at::Tensor> keep_alive;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (received, user buffer)
  std::string context;                         // "rank 2: send_recv on axis `ring` (group ranks ...)"
  std::shared_ptr<bool> context_failed;        // the DistContext's flag, set when Wait fails
  std::shared_ptr<const LocalPeers> peers;     // the group's peers on this host
  std::chrono::milliseconds timeout{0};
  bool done = false;
};

P2PHandle::P2PHandle() = default;
P2PHandle::P2PHandle(std::unique_ptr<State> state) : state_(std::move(state)) {}
P2PHandle::P2PHandle(P2PHandle&&) noexcept = default;
P2PHandle& P2PHandle::operator=(P2PHandle&& other) noexcept {
  if (this != &other) {
    if (state_ && !state_->done) {
      try {
        Wait();
      } catch (...) {
      }
    }
    state_ = std::move(other.state_);
  }
  return *this;
}
P2PHandle::~P2PHandle() {
  if (state_ && !state_->done) {
    try {
      Wait();
    } catch (...) {
    }
  }
}

bool P2PHandle::done() const { return !state_ || state_->done; }

void P2PHandle::Wait() {
  if (!state_ || state_->done) return;
  auto start = Clock::now();
  for (size_t i = 0; i < state_->works.size(); ++i) {
    bool ok = false;
    std::string msg;
    try {
      ok = state_->works[i]->wait(state_->timeout);
      if (!ok) msg = "timed out";
    } catch (const std::exception& e) {
      msg = BackendMessage(e);
    }
    if (!ok) {
      state_->done = true;  // do not wait again from the destructor
      if (state_->context_failed) *state_->context_failed = true;
      const std::string gone = GonePeers(*state_->peers);
      throw DistError(state_->context + " failed in " + state_->what[i] + " after " +
                      std::to_string(ElapsedMs(start)) + " ms (timeout " +
                      std::to_string(state_->timeout.count()) + " ms): " + msg +
                      (gone.empty() ? "" : "; " + gone) + " (a peer may have exited)");
    }
  }
  for (auto& [received, buffer] : state_->copy_back) buffer.copy_(received);
  state_->copy_back.clear();
  state_->keep_alive.clear();
  state_->works.clear();
  state_->done = true;
}

struct DistContext::Impl {
  WorldConfig world;
  Mesh mesh;
  DistOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  std::array<AxisGroup, kNumAxes> groups;
  CommCounters counters;
  DistContext::CollectiveObserver observer;
  bool shut_down = false;
  // A collective failed: peers may be gone, so the destructor skips the orderly Shutdown
  // (which would wait the whole timeout for them).
  std::shared_ptr<bool> failed = std::make_shared<bool>(false);
  std::vector<int> pids;  // per global rank: its pid when it runs on this host, else 0

  Impl(const WorldConfig& w, const Mesh& m, const DistOptions& o) : world(w), mesh(m), options(o) {}

  AxisGroup& Group(Axis axis) { return groups[static_cast<int>(axis)]; }

  std::string Context(Axis axis, const char* op) {
    return "rank " + std::to_string(world.rank) + ": " + op + " on axis `" + AxisName(axis) +
           "` (group ranks " + JoinRanks(Group(axis).ranks) + ")";
  }

  c10d::Backend& BackendFor(Axis axis, const at::Tensor& t, const char* op) {
    Backend& b = *Group(axis).backend;
    if (t.is_cuda()) {
      if (!b.nccl) {
        throw DistError(Context(axis, op) + ": CUDA tensor " + Describe(t) +
                        " but NCCL is not enabled (build with WEFT_ENABLE_CUDA=ON and set "
                        "DistOptions::enable_nccl)");
      }
      return *b.nccl;
    }
    if (!t.device().is_cpu()) {
      throw DistError(Context(axis, op) + ": tensor on unsupported device " + Describe(t));
    }
    return *b.gloo;
  }

  // Runs `post` (which issues one c10d call and returns its Work), waits with the timeout and
  // turns any failure into a DistError naming rank, axis, collective and shapes.
  template <class Post>
  void Run(Axis axis, const char* op, const std::string& shapes, Post&& post) {
    auto start = Clock::now();
    std::string msg;
    try {
      c10::intrusive_ptr<c10d::Work> work = post();
      if (work->wait(options.timeout)) {
        if (observer) observer(axis, op, start, Clock::now());
        return;
      }
      msg = "timed out";
    } catch (const DistError&) {
      throw;
    } catch (const std::exception& e) {
      msg = BackendMessage(e);
    }
    throw Failed(axis, op, shapes, start, msg);
  }

  DistError Failed(Axis axis, const char* op, const std::string& shapes, Clock::time_point start,
                   const std::string& msg) {
    *failed = true;
    const std::string gone = GonePeers(*Group(axis).local_peers);
    return DistError(Context(axis, op) + " with " + shapes + " failed after " + std::to_string(ElapsedMs(start)) +
                     " ms (timeout " + std::to_string(options.timeout.count()) + " ms): " + msg +
                     (gone.empty() ? "" : "; " + gone) + " (a peer may have exited)");
  }

  // The shared-memory transport for a CPU tensor on `axis`, or null (use the backend).
  ShmTransport* Shm(Axis axis, const at::Tensor& t) {
    Backend& b = *Group(axis).backend;
    return b.shm && t.device().is_cpu() ? b.shm.get() : nullptr;
  }

  // As Run, for a collective made of shared-memory exchanges (`exchange` runs them).
  template <class Exchanges>
  void RunShm(Axis axis, const char* op, const std::string& shapes, Exchanges&& exchange) {
    auto start = Clock::now();
    // Named like Gloo's ops ("gloo:all_to_all") in LibTorch's operator profile.
    RECORD_FUNCTION(std::string("shm:") + op, std::vector<c10::IValue>());
    try {
      exchange();
    } catch (const ShmError& e) {
      throw Failed(axis, op, shapes, start, e.what());
    }
    if (observer) observer(axis, op, start, Clock::now());
  }

  void CheckDim(Axis axis, const char* op, const at::Tensor& t, int64_t& dim) {
    int64_t nd = t.dim();
    if (dim < -nd || dim >= nd || nd == 0) {
      throw DistError(Context(axis, op) + ": dim " + std::to_string(dim) +
                      " is out of range for input " + Describe(t));
    }
    if (dim < 0) dim += nd;
  }
};

void ConfigureIntraOpThreads(int local_world_size, int threads) {
  at::set_num_threads(threads > 0 ? threads : DefaultThreadsPerRank(local_world_size));
}

DistContext::DistContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DistContext::~DistContext() {
  if (impl_ && !impl_->shut_down && !*impl_->failed) {
    try {
      Shutdown();
    } catch (...) {
    }
  }
}

void DistContext::Shutdown() {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  if (impl_->world.world_size == 1) return;
  const std::string key = "weft/shutdown";
  auto start = Clock::now();
  try {
    impl_->store->add(key, 1);
    while (impl_->store->add(key, 0) < impl_->world.world_size) {
      if (Clock::now() - start > impl_->options.timeout) {
        throw DistError("rank " + std::to_string(impl_->world.rank) + ": shutdown: not every rank finished within " +
                        std::to_string(impl_->options.timeout.count()) + " ms (a peer may have exited)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistError("rank " + std::to_string(impl_->world.rank) + ": shutdown failed after " +
                    std::to_string(ElapsedMs(start)) + " ms: " + BackendMessage(e) + " (a peer may have exited)");
  }
}

std::unique_ptr<DistContext> DistContext::Create(const WorldConfig& world, const MeshShape& shape,
                                                 const DistOptions& options) {
  ValidateWorld(world);
  Mesh mesh(shape, world.world_size);
#ifndef WEFT_WITH_CUDA
  if (options.enable_nccl) {
    throw DistError("rank " + std::to_string(world.rank) +
                    ": NCCL was requested but this weft was built without CUDA "
                    "(configure with -DWEFT_ENABLE_CUDA=ON against a CUDA LibTorch)");
  }
#endif
  auto impl = std::make_unique<Impl>(world, mesh, options);
  const std::string who = "rank " + std::to_string(world.rank) + ": ";
  const std::string where = world.master_addr + ":" + std::to_string(world.master_port);

  auto start = Clock::now();
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(world.master_port);
    so.isServer = world.rank == 0;
    so.numWorkers = world.world_size;
    so.waitWorkers = true;
    so.timeout = options.timeout;
    const int listen_fd = options.master_listen_fd >= 0 ? options.master_listen_fd : world.master_listen_fd;
    if (world.rank == 0 && listen_fd >= 0) so.masterListenFd = listen_fd;
    impl->store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, so);
  } catch (const std::exception& e) {
    std::string m = BackendMessage(e);
    if (world.rank == 0) {
      bool in_use = m.find("in use") != std::string::npos || m.find("EADDRINUSE") != std::string::npos;
      throw DistError(who + "cannot start the TCPStore server on " + where + " (MASTER_ADDR:MASTER_PORT)" +
                      (in_use ? ": the port is already in use; choose another MASTER_PORT, or let "
                                "`weft-run --nproc N` pick a free one"
                              : "") +
                      " [" + m + "]");
    }
    throw DistError(who + "cannot reach the TCPStore at " + where + " within " +
                    std::to_string(ElapsedMs(start)) + " ms (is rank 0 running, and are "
                    "MASTER_ADDR/MASTER_PORT the same on every rank?) [" + m + "]");
  }

  impl->pids.assign(world.world_size, 0);
  impl->pids[world.rank] = static_cast<int>(getpid());
  if (world.world_size > 1) {
    // Every rank's host and pid: a failed collective can then name the same-host peers that are
    // gone, whichever transport failed, and the shared-memory transport knows who shares this host.
    auto t0 = Clock::now();
    try {
      const std::string me = HostIdentity();
      const std::string mine = me + "|" + std::to_string(getpid());
      impl->store->set("weft/proc/" + std::to_string(world.rank), std::vector<uint8_t>(mine.begin(), mine.end()));
      std::vector<std::string> keys;
      for (int r = 0; r < world.world_size; ++r) keys.push_back("weft/proc/" + std::to_string(r));
      impl->store->wait(keys, options.timeout);
      for (int r = 0; r < world.world_size; ++r) {
        const std::vector<uint8_t> raw = impl->store->get(keys[r]);
        const std::string v(raw.begin(), raw.end());
        const size_t bar = v.rfind('|');
        if (bar != std::string::npos && v.substr(0, bar) == me) impl->pids[r] = std::stoi(v.substr(bar + 1));
      }
    } catch (const std::exception& e) {
      throw DistError(who + "not every rank arrived at the TCPStore " + where + " within " +
                      std::to_string(ElapsedMs(t0)) + " ms (timeout " + std::to_string(options.timeout.count()) +
                      " ms): " + BackendMessage(e) + " (a peer may have exited)");
    }
  }

  std::shared_ptr<gloo::transport::Device> device;
  {
    const std::string& a = world.master_addr;
    bool loopback = a == "127.0.0.1" || a == "localhost" || a.rfind("127.", 0) == 0;
    device = loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                      : c10d::ProcessGroupGloo::createDefaultDevice();
  }

  // Waiting ranks poll shared memory only when every busy thread of this host has its own core.
  const int64_t busy_threads = int64_t{std::max(1, world.local_world_size)} * at::get_num_threads();
  const std::chrono::microseconds spin(busy_threads <= static_cast<int64_t>(std::thread::hardware_concurrency()) ? 50
                                                                                                                 : 0);
  std::vector<std::shared_ptr<Backend>> made;
  for (Axis axis : kAllAxes) {
    AxisGroup& g = impl->Group(axis);
    g.ranks = mesh.GroupRanks(world.rank, axis);
    g.axis_rank = mesh.AxisRank(world.rank, axis);
    LocalPeers peers;
    for (int r : g.ranks) {
      if (r != world.rank && impl->pids[r] > 0) peers.emplace_back(r, impl->pids[r]);
    }
    g.local_peers = std::make_shared<const LocalPeers>(std::move(peers));
    if (g.ranks.size() < 2) continue;
    // Axes with the same member list (e.g. ring == cp when ulysses = 1) share one group.
    for (auto& b : made) {
      if (b->ranks == g.ranks) g.backend = b;
    }
    if (g.backend) continue;
    auto b = std::make_shared<Backend>();
    b->ranks = g.ranks;
    const int size = static_cast<int>(g.ranks.size());
    const std::string prefix =
        std::string("weft/") + AxisName(axis) + "/" + std::to_string(mesh.GroupIndex(world.rank, axis));
    auto t0 = Clock::now();
    try {
      auto gopts = c10d::ProcessGroupGloo::Options::create(options.timeout);
      gopts->devices = {device};
      gopts->threads = 1;
      b->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>(prefix, impl->store), g.axis_rank, size, gopts);
#ifdef WEFT_WITH_CUDA
      if (options.enable_nccl) {
        auto nopts = c10d::ProcessGroupNCCL::Options::create();
        nopts->timeout = options.timeout;
        b->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
            c10::make_intrusive<c10d::PrefixStore>(prefix + "/nccl", impl->store), g.axis_rank, size,
            nopts);
      }
#endif
    } catch (const std::exception& e) {
      throw DistError(impl->Context(axis, "creating the process group") + " failed after " +
                      std::to_string(ElapsedMs(t0)) + " ms (timeout " +
                      std::to_string(options.timeout.count()) + " ms): " + BackendMessage(e) +
                      " (a peer may have exited)");
    }
    try {
      // Also with shared memory off here: the group decides as a whole (see ShmTransport::Create).
      auto group_store = c10::make_intrusive<c10d::PrefixStore>(prefix, impl->store);
      std::vector<int> group_pids;
      for (int r : g.ranks) group_pids.push_back(impl->pids[r]);
      b->shm = ShmTransport::Create(*group_store, g.axis_rank, size, std::max<int64_t>(0, options.shm_budget_bytes),
                                    options.timeout, spin, group_pids, &b->shm_why_not);
    } catch (const ShmError& e) {
      throw DistError(impl->Context(axis, "creating the process group") + ": " + e.what() +
                      " (a peer may have exited)");
    }
    g.backend = b;
    made.push_back(b);
  }
  return std::unique_ptr<DistContext>(new DistContext(std::move(impl)));
}

int DistContext::rank() const { return impl_->world.rank; }
int DistContext::world_size() const { return impl_->world.world_size; }
const WorldConfig& DistContext::world() const { return impl_->world; }
const Mesh& DistContext::mesh() const { return impl_->mesh; }
const DistOptions& DistContext::options() const { return impl_->options; }
int DistContext::AxisRank(Axis axis) const { return impl_->groups[static_cast<int>(axis)].axis_rank; }
int DistContext::AxisSize(Axis axis) const {
  return static_cast<int>(impl_->groups[static_cast<int>(axis)].ranks.size());
}
const std::vector<int>& DistContext::GroupRanks(Axis axis) const {
  return impl_->groups[static_cast<int>(axis)].ranks;
}
std::string DistContext::CpuTransport(Axis axis) const {
  const AxisGroup& g = impl_->groups[static_cast<int>(axis)];
  if (!g.backend) return "local";
  return g.backend->shm ? "shm" : "gloo (" + g.backend->shm_why_not + ")";
}
const CommCounters& DistContext::counters() const { return impl_->counters; }
void DistContext::SetCollectiveObserver(CollectiveObserver observer) { impl_->observer = std::move(observer); }
CommCounters& DistContext::counters() { return impl_->counters; }

at::Tensor DistContext::AllGather(Axis axis, const at::Tensor& input, int64_t dim) {
  const char* op = CommOpName(CommOp::kAllGather);
  impl_->CheckDim(axis, op, input, dim);
  const int n = AxisSize(axis);
  impl_->counters.Record(axis, CommOp::kAllGather, Bytes(input) * (n - 1));
  if (n == 1) return input.clone();
  if (ShmTransport* shm = impl_->Shm(axis, input)) {
    std::vector<int64_t> shape = input.sizes().vec();
    shape[dim] *= n;
    at::Tensor out = at::empty(shape, input.options());
    std::vector<at::Tensor> recv;
    for (int j = 0; j < n; ++j) recv.push_back(out.narrow(dim, j * input.size(dim), input.size(dim)));
    impl_->RunShm(axis, op, "input " + Describe(input), [&] { shm->Exchange(std::vector<at::Tensor>(n, input), recv); });
    return out;
  }
  at::Tensor in = input.contiguous();
  std::vector<std::vector<at::Tensor>> outs(1);
  for (int i = 0; i < n; ++i) outs[0].push_back(at::empty_like(in));
  std::vector<at::Tensor> ins{in};
  c10d::Backend& b = impl_->BackendFor(axis, in, op);
  impl_->Run(axis, op, "input " + Describe(input),
             [&] { return b.allgather(outs, ins, c10d::AllgatherOptions{impl_->options.timeout}); });
  return at::cat(outs[0], dim);
}

std::vector<int64_t> DistContext::AllGatherSizes(Axis axis, int64_t value) {
  const int n = AxisSize(axis);
  impl_->counters.Record(axis, CommOp::kAllGatherSizes, 8 * (n - 1));
  if (n == 1) return {value};
  at::Tensor in = at::full({1}, value, at::kLong);
  const char* op = CommOpName(CommOp::kAllGatherSizes);
  if (ShmTransport* shm = impl_->Shm(axis, in)) {
    at::Tensor out = at::empty({n}, at::kLong);
    std::vector<at::Tensor> recv;
    for (int j = 0; j < n; ++j) recv.push_back(out.narrow(0, j, 1));
    impl_->RunShm(axis, op, "value " + std::to_string(value), [&] { shm->Exchange(std::vector<at::Tensor>(n, in), recv); });
    const int64_t* v = out.data_ptr<int64_t>();
    return std::vector<int64_t>(v, v + n);
  }
  std::vector<std::vector<at::Tensor>> outs(1);
  for (int i = 0; i < n; ++i) outs[0].push_back(at::empty_like(in));
  std::vector<at::Tensor> ins{in};
  c10d::Backend& b = *impl_->Group(axis).backend->gloo;
  impl_->Run(axis, op, "value " + std::to_string(value),
             [&] { return b.allgather(outs, ins, c10d::AllgatherOptions{impl_->options.timeout}); });
  std::vector<int64_t> sizes;
  for (const at::Tensor& t : outs[0]) sizes.push_back(t.item<int64_t>());
  return sizes;
}

at::Tensor DistContext::AllGatherUneven(Axis axis, const at::Tensor& input, int64_t dim) {
  const char* op = CommOpName(CommOp::kAllGather);
  impl_->CheckDim(axis, op, input, dim);
  const int n = AxisSize(axis);
  if (n == 1) {
    impl_->counters.Record(axis, CommOp::kAllGatherSizes, 0);
    impl_->counters.Record(axis, CommOp::kAllGather, 0);
    return input.clone();
  }
  std::vector<int64_t> sizes = AllGatherSizes(axis, input.size(dim));
  impl_->counters.Record(axis, CommOp::kAllGather, Bytes(input) * (n - 1));
  if (ShmTransport* shm = impl_->Shm(axis, input)) {
    std::vector<int64_t> shape = input.sizes().vec();
    shape[dim] = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    at::Tensor out = at::empty(shape, input.options());
    std::vector<at::Tensor> recv;
    int64_t offset = 0;
    for (int j = 0; j < n; ++j) {
      recv.push_back(out.narrow(dim, offset, sizes[j]));
      offset += sizes[j];
    }
    impl_->RunShm(axis, op, "input " + Describe(input) + " (uneven, sizes exchanged)", [&] { shm->Exchange(std::vector<at::Tensor>(n, input), recv); });
    return out;
  }
  // An all-to-all whose every chunk is my shard: each peer receives exactly my bytes, with
  // no padding to the largest shard.
  at::Tensor rows = input.movedim(dim, 0).contiguous();
  at::Tensor in = at::cat(std::vector<at::Tensor>(n, rows), 0);
  std::vector<int64_t> out_shape = rows.sizes().vec();
  out_shape[0] = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  at::Tensor out = at::empty(out_shape, rows.options());
  std::vector<int64_t> in_splits(n, rows.size(0));
  c10d::Backend& b = impl_->BackendFor(axis, in, op);
  impl_->Run(axis, op, "input " + Describe(input) + " (uneven, sizes exchanged)", [&] {
    return b.alltoall_base(out, in, sizes, in_splits, c10d::AllToAllOptions{impl_->options.timeout});
  });
  return out.movedim(0, dim).contiguous();
}

at::Tensor DistContext::AllToAll(Axis axis, const at::Tensor& input, int64_t scatter_dim,
                                 int64_t gather_dim) {
  const char* op = CommOpName(CommOp::kAllToAll);
  impl_->CheckDim(axis, op, input, scatter_dim);
  impl_->CheckDim(axis, op, input, gather_dim);
  const int n = AxisSize(axis);
  if (input.size(scatter_dim) % n != 0) {
    throw DistError(impl_->Context(axis, op) + ": input " + Describe(input) + " dim " +
                    std::to_string(scatter_dim) + " (size " + std::to_string(input.size(scatter_dim)) +
                    ") does not divide by the group size " + std::to_string(n) +
                    "; use AllToAllSingle with explicit splits");
  }
  impl_->counters.Record(axis, CommOp::kAllToAll, Bytes(input) * (n - 1) / n);
  if (n == 1) return input.clone();
  if (ShmTransport* shm = impl_->Shm(axis, input)) {
    const int64_t c = input.size(scatter_dim) / n;
    std::vector<int64_t> shape = input.sizes().vec();
    shape[scatter_dim] = c;
    const int64_t g = shape[gather_dim];
    shape[gather_dim] *= n;
    at::Tensor out = at::empty(shape, input.options());
    std::vector<at::Tensor> send, recv;
    for (int j = 0; j < n; ++j) {
      send.push_back(input.narrow(scatter_dim, j * c, c));
      recv.push_back(out.narrow(gather_dim, j * g, g));
    }
    impl_->RunShm(axis, op, "input " + Describe(input), [&] { shm->Exchange(send, recv); });
    return out;
  }
  at::Tensor in = at::stack(input.chunk(n, scatter_dim), 0);  // [n, chunk...], contiguous
  at::Tensor out = at::empty_like(in);
  std::vector<int64_t> none;
  c10d::Backend& b = impl_->BackendFor(axis, in, op);
  impl_->Run(axis, op, "input " + Describe(input), [&] {
    return b.alltoall_base(out, in, none, none, c10d::AllToAllOptions{impl_->options.timeout});
  });
  return at::cat(out.unbind(0), gather_dim);
}

at::Tensor DistContext::AllToAllSingle(Axis axis, const at::Tensor& input,
                                       const std::vector<int64_t>& in_splits,
                                       const std::vector<int64_t>& out_splits) {
  const char* op = CommOpName(CommOp::kAllToAll);
  const int n = AxisSize(axis);
  const int me = AxisRank(axis);
  if (input.dim() == 0) {
    throw DistError(impl_->Context(axis, op) + ": input must have at least one dim");
  }
  const int64_t row_bytes = input.size(0) == 0 ? 0 : Bytes(input) / input.size(0);
  std::vector<int64_t> ins = in_splits, outs = out_splits;
  auto splits_str = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  if (ins.empty() && outs.empty()) {
    if (input.size(0) % n != 0) {
      throw DistError(impl_->Context(axis, op) + ": input " + Describe(input) +
                      " dim 0 does not divide by the group size " + std::to_string(n) +
                      "; pass in_splits and out_splits");
    }
    ins.assign(n, input.size(0) / n);
    outs = ins;
  } else {
    bool ok = static_cast<int>(ins.size()) == n && static_cast<int>(outs.size()) == n &&
              std::all_of(ins.begin(), ins.end(), [](int64_t v) { return v >= 0; }) &&
              std::all_of(outs.begin(), outs.end(), [](int64_t v) { return v >= 0; }) &&
              std::accumulate(ins.begin(), ins.end(), int64_t{0}) == input.size(0);
    if (!ok) {
      throw DistError(impl_->Context(axis, op) + ": bad splits for input " + Describe(input) +
                      ": in_splits " + splits_str(ins) + ", out_splits " + splits_str(outs) +
                      " (need " + std::to_string(n) + " non-negative entries each, in_splits "
                      "summing to dim 0)");
    }
  }
  impl_->counters.Record(axis, CommOp::kAllToAll, (input.size(0) - ins[me]) * row_bytes);
  std::vector<int64_t> shape = input.sizes().vec();
  shape[0] = std::accumulate(outs.begin(), outs.end(), int64_t{0});
  if (n == 1) return input.clone();
  const std::string shapes =
      "input " + Describe(input) + ", in_splits " + splits_str(ins) + ", out_splits " + splits_str(outs);
  if (ShmTransport* shm = impl_->Shm(axis, input)) {
    at::Tensor out = at::empty(shape, input.options());
    std::vector<at::Tensor> send, recv;
    int64_t in_offset = 0, out_offset = 0;
    for (int j = 0; j < n; ++j) {
      send.push_back(input.narrow(0, in_offset, ins[j]));
      recv.push_back(out.narrow(0, out_offset, outs[j]));
      in_offset += ins[j];
      out_offset += outs[j];
    }
    impl_->RunShm(axis, op, shapes, [&] { shm->Exchange(send, recv); });
    return out;
  }
  at::Tensor in = input.contiguous();
  at::Tensor out = at::empty(shape, in.options());
  c10d::Backend& b = impl_->BackendFor(axis, in, op);
  impl_->Run(axis, op, shapes,
             [&] { return b.alltoall_base(out, in, outs, ins, c10d::AllToAllOptions{impl_->options.timeout}); });
  return out;
}

void DistContext::AllReduce(Axis axis, at::Tensor& tensor, ReduceKind kind) {
  const char* op = CommOpName(CommOp::kAllReduce);
  const int n = AxisSize(axis);
  impl_->counters.Record(axis, CommOp::kAllReduce, 2 * (n - 1) * Bytes(tensor) / n);
  if (n == 1) return;
  if (!tensor.is_contiguous()) {
    throw DistError(impl_->Context(axis, op) + ": tensor " + Describe(tensor) + " is not contiguous");
  }
  if (ShmTransport* shm = impl_->Shm(axis, tensor)) {
    // Reduce-scatter then all-gather, both as exchanges. Each rank reduces its slice in rank
    // order, so every rank ends with the same bits.
    const std::string shapes = "tensor " + Describe(tensor);
    at::Tensor flat = tensor.view({-1});
    const int64_t total = flat.numel();
    std::vector<at::Tensor> slices;
    for (int64_t j = 0, offset = 0; j < n; ++j) {
      const int64_t len = total / n + (j < total % n ? 1 : 0);
      slices.push_back(flat.narrow(0, offset, len));
      offset += len;
    }
    const int me = AxisRank(axis);
    impl_->RunShm(axis, op, shapes, [&] {
      at::Tensor parts = at::empty({n, slices[me].numel()}, tensor.options());
      shm->Exchange(slices, parts.unbind(0));
      at::Tensor reduced = parts[0].clone();
      for (int j = 1; j < n; ++j) {
        if (kind == ReduceKind::kSum) {
          reduced.add_(parts[j]);
        } else if (kind == ReduceKind::kMax) {
          at::maximum_out(reduced, reduced, parts[j]);
        } else {
          at::minimum_out(reduced, reduced, parts[j]);
        }
      }
      shm->Exchange(std::vector<at::Tensor>(n, reduced), slices);
    });
    return;
  }
  c10d::AllreduceOptions o;
  o.timeout = impl_->options.timeout;
  o.reduceOp = kind == ReduceKind::kSum   ? c10d::ReduceOp::SUM
               : kind == ReduceKind::kMax ? c10d::ReduceOp::MAX
                                          : c10d::ReduceOp::MIN;
  std::vector<at::Tensor> ts{tensor};
  c10d::Backend& b = impl_->BackendFor(axis, tensor, op);
  impl_->Run(axis, op, "tensor " + Describe(tensor), [&] { return b.allreduce(ts, o); });
}

P2PHandle DistContext::SendRecv(Axis axis, std::vector<Send> sends, std::vector<Recv> recvs) {
  const char* op = CommOpName(CommOp::kSendRecv);
  const int n = AxisSize(axis);
  const int me = AxisRank(axis);
  AxisGroup& g = impl_->Group(axis);
  int64_t bytes = 0;
  for (const Send& s : sends) bytes += Bytes(s.tensor);
  auto state = std::make_unique<P2PHandle::State>();
  state->context = impl_->Context(axis, op);
  state->context_failed = impl_->failed;
  state->peers = impl_->Group(axis).local_peers;
  state->timeout = impl_->options.timeout;
  for (const Send& s : sends) {
    if (s.dst < 0 || s.dst >= n || s.dst == me) {
      throw DistError(state->context + ": send to axis rank " + std::to_string(s.dst) +
                      " (must be another rank in 0.." + std::to_string(n - 1) + ")");
    }
  }
  for (const Recv& r : recvs) {
    if (r.src < 0 || r.src >= n || r.src == me) {
      throw DistError(state->context + ": recv from axis rank " + std::to_string(r.src) +
                      " (must be another rank in 0.." + std::to_string(n - 1) + ")");
    }
  }
  impl_->counters.Record(axis, CommOp::kSendRecv, bytes);
  const uint32_t seq = g.p2p_seq++ & ((1u << 18) - 1);
  // Tag = axis | call sequence | index among this call's messages with the same peer.
  auto tag = [&](int k) {
    if (k >= 512) throw DistError(state->context + ": more than 512 messages with one peer in a batch");
    return static_cast<int>((static_cast<uint32_t>(axis) << 27) | (seq << 9) | static_cast<uint32_t>(k));
  };
  std::vector<int> sent_to(n, 0), recv_from(n, 0);
  auto start = Clock::now();
  std::string where;
  try {
    for (const Send& s : sends) {
      where = "send " + Describe(s.tensor) + " to axis rank " + std::to_string(s.dst);
      at::Tensor t = s.tensor.contiguous();
      std::vector<at::Tensor> ts{t};
      c10d::Backend& b = impl_->BackendFor(axis, t, op);
      state->works.push_back(b.send(ts, s.dst, tag(sent_to[s.dst]++)));
      state->what.push_back(where);
      state->keep_alive.push_back(t);
    }
    for (const Recv& r : recvs) {
      where = "recv " + Describe(r.buffer) + " from axis rank " + std::to_string(r.src);
      at::Tensor t = r.buffer.is_contiguous() ? r.buffer : at::empty_like(r.buffer, at::MemoryFormat::Contiguous);
      std::vector<at::Tensor> ts{t};
      c10d::Backend& b = impl_->BackendFor(axis, t, op);
      state->works.push_back(b.recv(ts, r.src, tag(recv_from[r.src]++)));
      state->what.push_back(where);
      state->keep_alive.push_back(t);
      if (!t.is_same(r.buffer)) state->copy_back.emplace_back(t, r.buffer);
    }
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    *impl_->failed = true;
    const std::string gone = GonePeers(*state->peers);
    throw DistError(state->context + " failed posting " + where + " after " +
                    std::to_string(ElapsedMs(start)) + " ms: " + BackendMessage(e) +
                    (gone.empty() ? "" : "; " + gone) + " (a peer may have exited)");
  }
  return P2PHandle(std::move(state));
}

void DistContext::Barrier(Axis axis) {
  const char* op = CommOpName(CommOp::kBarrier);
  impl_->counters.Record(axis, CommOp::kBarrier, 0);
  if (AxisSize(axis) == 1) return;
  if (ShmTransport* shm = impl_->Group(axis).backend->shm.get()) {
    const int n = AxisSize(axis);
    impl_->RunShm(axis, op, "no tensor", [&] { shm->Exchange(std::vector<at::Tensor>(n), std::vector<at::Tensor>(n)); });
    return;
  }
  c10d::BarrierOptions o;
  o.timeout = impl_->options.timeout;
  c10d::Backend& b = *impl_->Group(axis).backend->gloo;
  impl_->Run(axis, op, "no tensor", [&] { return b.barrier(o); });
}

}  // namespace weft::dist
