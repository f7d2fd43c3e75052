#include "runtime/dist/dist_context.h"

#include "runtime/dist/shm_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
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

// The first line of a c10d error (later lines are its C++ stack).
std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

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
  // Gloo's "[/path/to/gloo/transport/tcp/pair.cc:537] " source position and its advice after the
  // error ("This is typically caused by ... GLHF!") say nothing the rest of the message does not.
  if (m.size() > 2 && m[0] == '[') {
    const size_t close = m.find("] ");
    if (close != std::string::npos && m.find(".cc:") < close) m = m.substr(close + 2);
  }
  if (const size_t advice = m.find(" This is typically caused by"); advice != std::string::npos) m.resize(advice);
  while (!m.empty() && (m.back() == ' ' || m.back() == '\t')) m.pop_back();
  if (m.size() > 600) m = m.substr(0, 600) + "...";
  return m;
}

int64_t Bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// The other members of one group, as exchanged at creation: who they are and where they run,
// so that a failed collective can say which peer it was waiting for, on which host, and what
// became of it.
struct GroupPeers {
  struct Peer {
    int rank = 0;      // global rank
    int pid = 0;       // its process id when it runs on this host, else 0
    std::string host;  // its hostname
  };
  std::vector<Peer> peers;  // in axis rank order, without this rank

  const Peer* Find(int rank) const {
    for (const Peer& p : peers) {
      if (p.rank == rank) return &p;
    }
    return nullptr;
  }
};

std::string PeerName(const GroupPeers::Peer& p) {
  return "rank " + std::to_string(p.rank) + " (" + (p.pid > 0 ? "pid " + std::to_string(p.pid) + ", " : "") + "host " +
         p.host + ")";
}

std::string JoinNames(const std::vector<const GroupPeers::Peer*>& peers) {
  std::string s;
  for (const GroupPeers::Peer* p : peers) s += (s.empty() ? "" : ", ") + PeerName(*p);
  return s;
}

// What a failed collective knows about its peers, most telling first: "rank 3 (pid 4242, host
// node1) is no longer running", "... is stopped", "no answer from rank 1 (...)" (the peers a
// shared-memory exchange was still waiting for, `waiting` global ranks), else the group's peers
// on other hosts ("peer on another host: rank 2 (host node2)"), whose state this host cannot
// see. "" when nothing is known. A killed peer's sockets close before the kernel marks it
// exited, so a backend can report the closed connection a moment before the process looks
// gone: look for up to 1 s (on a loaded host an exiting process can take longer than 100 ms to
// be marked gone). Only a failed collective waits here.
std::string DescribePeers(const GroupPeers& group, const std::vector<int>& waiting = {}) {
  std::vector<const GroupPeers::Peer*> local, remote;
  for (const GroupPeers::Peer& p : group.peers) (p.pid > 0 ? local : remote).push_back(&p);
  std::vector<const GroupPeers::Peer*> gone;
  for (int attempt = 0; attempt < 100 && gone.empty() && !local.empty(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (const GroupPeers::Peer* p : local) {
      if (ProcessGone(p->pid)) gone.push_back(p);
    }
  }
  if (!gone.empty()) return JoinNames(gone) + (gone.size() == 1 ? " is" : " are") + " no longer running";
  std::vector<const GroupPeers::Peer*> stopped;
  for (const GroupPeers::Peer* p : local) {
    if (ProcessStopped(p->pid)) stopped.push_back(p);
  }
  if (!stopped.empty()) return JoinNames(stopped) + (stopped.size() == 1 ? " is" : " are") + " stopped (SIGSTOP)";
  std::vector<const GroupPeers::Peer*> silent;
  for (int r : waiting) {
    if (const GroupPeers::Peer* p = group.Find(r)) silent.push_back(p);
  }
  if (!silent.empty()) return "no answer from " + JoinNames(silent);
  if (!remote.empty()) return std::string(remote.size() == 1 ? "peer" : "peers") + " on another host: " + JoinNames(remote);
  return "";
}

// The ending of every failed collective's message.
const char* const kPeerHint = " (a peer may have exited, stopped, or become unreachable)";

// What every rank publishes at the rendezvous (key weft/proc/<rank>): its pid, hostname, host
// identity (HostIdentity) and job (DistOptions::job), as lines.
struct ProcRecord {
  int pid = 0;
  std::string host = "?";
  std::string identity;
  std::vector<std::pair<std::string, std::string>> job;

  std::string Serialize() const {
    std::string s = std::to_string(pid) + "\n" + host + "\n" + identity + "\n";
    for (const auto& [key, value] : job) s += key + "=" + value + "\n";
    return s;
  }
  static ProcRecord Parse(const std::vector<uint8_t>& raw) {
    std::istringstream in(std::string(raw.begin(), raw.end()));
    ProcRecord r;
    std::string line;
    if (std::getline(in, line)) r.pid = std::atoi(line.c_str());
    if (std::getline(in, line)) r.host = line;
    if (std::getline(in, line)) r.identity = line;
    while (std::getline(in, line)) {
      const size_t eq = line.find('=');
      r.job.emplace_back(line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1));
    }
    return r;
  }
  std::string Name() const { return "pid " + std::to_string(pid) + ", host " + host; }
};

// The first field in which job `a` and job `b` differ, as "`seed` is 7 here but 0 on rank 0",
// from the point of view of `a`; "" when they are the same.
std::string JobDifference(const ProcRecord& a, const ProcRecord& b, const std::string& here, const std::string& there) {
  auto find = [](const ProcRecord& r, const std::string& key) -> const std::string* {
    for (const auto& kv : r.job) {
      if (kv.first == key) return &kv.second;
    }
    return nullptr;
  };
  auto shown = [](const std::string* v) { return v == nullptr ? std::string("not set") : "`" + *v + "`"; };
  for (const auto& [key, value] : a.job) {
    const std::string* other = find(b, key);
    if (other == nullptr || *other != value) {
      return "`" + key + "` is " + shown(&value) + " " + here + " but " + shown(other) + " " + there;
    }
  }
  for (const auto& [key, value] : b.job) {
    if (find(a, key) == nullptr) return "`" + key + "` is not set " + here + " but `" + value + "` " + there;
  }
  return "";
}

// Every rank runs the same job: refuses (on every rank, so none waits for the others) when a
// rank's job differs from rank 0's, naming the rank, its host and the first differing field.
void CheckSameJob(const WorldConfig& world, const std::string& where, const std::vector<ProcRecord>& records) {
  const std::string who = "rank " + std::to_string(world.rank) + ": ";
  const std::string hint = "; every rank must run the same job. Is a rank of another job using MASTER_ADDR:MASTER_PORT " +
                           where + "? Give each job its own MASTER_PORT";
  const ProcRecord& mine = records[world.rank];
  if (world.rank != 0) {
    const std::string diff = JobDifference(mine, records[0], "here", "on rank 0 (" + records[0].Name() + ")");
    if (!diff.empty()) throw DistError(who + "this rank's job differs from rank 0's: " + diff + hint);
  }
  std::vector<int> differing;
  for (int r = 1; r < world.world_size; ++r) {
    if (r != world.rank && !JobDifference(records[r], records[0], "", "").empty()) differing.push_back(r);
  }
  if (differing.empty()) return;
  const int r = differing.front();
  std::string more;
  if (differing.size() > 1) more = " (and " + std::to_string(differing.size() - 1) + " more rank(s))";
  throw DistError(who + "rank " + std::to_string(r) + " (" + records[r].Name() + ") runs another job than rank 0" + more +
                  ": " + JobDifference(records[r], records[0], "there", "on rank 0") + hint);
}

// c10d logs every retry of a store connection and more on stderr (some 40 lines for one rank
// that waits for a missing rank 0); weft's own errors say what happened. Unless the user chose
// a level (TORCH_CPP_LOG_LEVEL), keep only c10d's errors.
bool UserChoseC10dLogLevel() {
  const char* level = std::getenv("TORCH_CPP_LOG_LEVEL");
  return level != nullptr && *level != '\0';
}

void QuietC10dLogs() {
  if (!UserChoseC10dLogLevel() && FLAGS_caffe2_log_level < 2) FLAGS_caffe2_log_level = 2;
}

// While a rank connects to the store, c10d logs each failed try as an error, with the C++
// backtrace of its exception (some 20 lines for a rank 1 whose rank 0 never comes); the
// DistError thrown after it says what happened. Unless the user chose a level, only fatal
// messages are printed while this is alive.
class QuietStoreConnect {
 public:
  QuietStoreConnect() : saved_(FLAGS_caffe2_log_level) {
    if (!UserChoseC10dLogLevel()) FLAGS_caffe2_log_level = std::max(saved_, 3);
  }
  ~QuietStoreConnect() { FLAGS_caffe2_log_level = saved_; }
  QuietStoreConnect(const QuietStoreConnect&) = delete;
  QuietStoreConnect& operator=(const QuietStoreConnect&) = delete;

 private:
  int saved_;
};

// Connects to (rank 0: starts) the TCPStore, giving up at `deadline`: null then. c10d's
// constructor retries a failed connect or handshake after backoff sleeps that ignore its
// timeout, and compares whole seconds with it, so against an address that drops packets, or a
// proxy that accepts for it, it overran --timeout 5 to 12.9 s. It runs on a thread of its own;
// one given up on ends within c10d's own timeout (`so.timeout`), meanwhile the caller reports
// the error (weft-run exits with it at once).
c10::intrusive_ptr<c10d::TCPStore> ConnectStoreBefore(const std::string& host, const c10d::TCPStoreOptions& so,
                                                      Clock::time_point deadline) {
  struct Attempt {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    c10::intrusive_ptr<c10d::TCPStore> store;
    std::exception_ptr error;
  };
  auto attempt = std::make_shared<Attempt>();
  std::thread([attempt, host, so] {
    c10::intrusive_ptr<c10d::TCPStore> store;
    std::exception_ptr error;
    try {
      // Held by the thread that retries, so that one given up on stays quiet until it ends.
      QuietStoreConnect quiet;
      store = c10::make_intrusive<c10d::TCPStore>(host, so);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(attempt->mutex);
    attempt->store = std::move(store);
    attempt->error = error;
    attempt->done = true;
    attempt->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(attempt->mutex);
  if (!attempt->done_cv.wait_until(lock, deadline, [&] { return attempt->done; })) return {};
  if (attempt->error) std::rethrow_exception(attempt->error);
  return attempt->store;
}

// The local address the kernel would send from to reach `host` (IPv4 or IPv6), or "".
std::string LocalAddressTowards(const std::string& host, int port) {
  addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) return "";
  std::string result;
  for (addrinfo* ai = found; ai != nullptr && result.empty(); ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage local {};
    socklen_t len = sizeof local;
    char text[INET6_ADDRSTRLEN] = {};
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* addr = local.ss_family == AF_INET
                             ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                             : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, addr, text, sizeof text) != nullptr) result = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return result;
}

// The network device Gloo's pairs use: the interface named by GLOO_SOCKET_IFNAME (as in
// torch.distributed; the first of a comma-separated list), loopback when MASTER_ADDR is, else
// the address this host reaches MASTER_ADDR from -- the one address every peer can reach it on
// when hosts have several (c10d's default picks the address of the hostname, which is loopback
// or nothing on many machines, and which peers on other hosts then cannot connect to).
std::shared_ptr<gloo::transport::Device> GlooDevice(const WorldConfig& world) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
    std::string first = ifname;
    first = first.substr(0, first.find(','));
    try {
      return c10d::ProcessGroupGloo::createDeviceForInterface(first);
    } catch (const std::exception& e) {
      throw DistError("rank " + std::to_string(world.rank) + ": GLOO_SOCKET_IFNAME=" + ifname +
                      ": cannot use network interface `" + first + "`: " + BackendMessage(e));
    }
  }
  const std::string& a = world.master_addr;
  if (a == "127.0.0.1" || a == "localhost" || a.rfind("127.", 0) == 0 || a == "::1") {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  const std::string local = LocalAddressTowards(a, world.master_port);
  if (!local.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(local);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// One process group and the state shared by the axes that map onto it.
struct Backend {
  std::vector<int> ranks;
  c10::intrusive_ptr<c10d::Backend> gloo;
  c10::intrusive_ptr<c10d::Backend> nccl;
  std::unique_ptr<ShmTransport> shm;  // CPU collectives when set
  std::string shm_why_not;
  bool own = false;  // never shared with another axis of the same members (kWeights)
};

struct AxisGroup {
  std::vector<int> ranks;
  // The group's other members (rank, pid on this host, host): named in errors.
  std::shared_ptr<const GroupPeers> peers = std::make_shared<const GroupPeers>();
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
  std::shared_ptr<const GroupPeers> peers;     // the group's other members
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
      const std::string peers = DescribePeers(*state_->peers);
      throw DistError(state_->context + " failed in " + state_->what[i] + " after " +
                      std::to_string(ElapsedMs(start)) + " ms (timeout " +
                      std::to_string(state_->timeout.count()) + " ms): " + msg +
                      (peers.empty() ? "" : "; " + peers) + kPeerHint);
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
  std::vector<std::string> hosts;  // per global rank: its hostname

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
  // `observe`: tell the observer (a caller on another thread than the job's does not).
  template <class Post>
  void Run(Axis axis, const char* op, const std::string& shapes, Post&& post, bool observe = true) {
    auto start = Clock::now();
    std::string msg;
    try {
      c10::intrusive_ptr<c10d::Work> work = post();
      if (work->wait(options.timeout)) {
        if (observer && observe) observer(axis, op, start, Clock::now());
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

  // `waiting`: the axis ranks a shared-memory exchange was still waiting for.
  DistError Failed(Axis axis, const char* op, const std::string& shapes, Clock::time_point start,
                   const std::string& msg, const std::vector<int>& waiting = {}) {
    *failed = true;
    std::vector<int> global;
    for (int r : waiting) {
      if (r >= 0 && r < static_cast<int>(Group(axis).ranks.size())) global.push_back(Group(axis).ranks[r]);
    }
    const std::string peers = DescribePeers(*Group(axis).peers, global);
    return DistError(Context(axis, op) + " with " + shapes + " failed after " + std::to_string(ElapsedMs(start)) +
                     " ms (timeout " + std::to_string(options.timeout.count()) + " ms): " + msg +
                     (peers.empty() ? "" : "; " + peers) + kPeerHint);
  }

  // The shared-memory transport for a CPU tensor on `axis`, or null (use the backend).
  ShmTransport* Shm(Axis axis, const at::Tensor& t) {
    Backend& b = *Group(axis).backend;
    return b.shm && t.device().is_cpu() ? b.shm.get() : nullptr;
  }

  // As Run, for a collective made of shared-memory exchanges (`exchange` runs them).
  template <class Exchanges>
  void RunShm(Axis axis, const char* op, const std::string& shapes, Exchanges&& exchange, bool observe = true) {
    auto start = Clock::now();
    // Named like Gloo's ops ("gloo:all_to_all") in LibTorch's operator profile.
    RECORD_FUNCTION(std::string("shm:") + op, std::vector<c10::IValue>());
    try {
      exchange();
    } catch (const ShmError& e) {
      throw Failed(axis, op, shapes, start, e.what(), e.peers());
    }
    if (observer && observe) observer(axis, op, start, Clock::now());
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
  // Skipped too while an exception unwinds this rank (an error of its own, e.g. bad data only it
  // holds): its peers may be waiting in a collective it will never join, and would hold it here
  // for the whole timeout; its exit is what tells them.
  if (impl_ && !impl_->shut_down && !*impl_->failed && std::uncaught_exceptions() == 0) {
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

  QuietC10dLogs();
  auto start = Clock::now();
  // One deadline for the whole rendezvous (reaching the store, every rank arriving at it, each
  // process group connecting), not a fresh timeout for each step.
  const Clock::time_point deadline = start + options.timeout;
  const auto remaining = [&deadline] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  const std::string timeout_text = " (timeout " + std::to_string(options.timeout.count()) + " ms)";
  bool timed_out = false;
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(world.master_port);
    // Under torchrun the agent serves the store: every rank is a client of it.
    so.isServer = world.rank == 0 && !world.use_agent_store;
    so.numWorkers = world.world_size;
    // The server does not wait for clients here: the proc-table wait below does, and can say
    // which ranks are missing.
    so.waitWorkers = false;
    // What is left of the deadline bounds c10d's own retries too (a connect given up on ends
    // sooner); the store's timeout for later operations is set back to the whole one below.
    so.timeout = remaining();
    const int listen_fd = options.master_listen_fd >= 0 ? options.master_listen_fd : world.master_listen_fd;
    if (so.isServer && listen_fd >= 0) so.masterListenFd = listen_fd;
    c10::intrusive_ptr<c10d::TCPStore> tcp = ConnectStoreBefore(world.master_addr, so, deadline);
    if (!tcp) {
      timed_out = true;
      throw DistError("no answer before the deadline");
    }
    tcp->setTimeout(options.timeout);
    impl->store = tcp;
    if (!world.store_prefix.empty()) impl->store = c10::make_intrusive<c10d::PrefixStore>(world.store_prefix, tcp);
  } catch (const std::exception& e) {
    std::string m = BackendMessage(e);
    if (world.rank == 0 && !world.use_agent_store) {
      bool in_use = m.find("in use") != std::string::npos || m.find("EADDRINUSE") != std::string::npos;
      throw DistError(who + "cannot start the TCPStore server on " + where + " (MASTER_ADDR:MASTER_PORT)" +
                      (in_use ? ": the port is already in use; choose another MASTER_PORT, or let "
                                "`weft-run --nproc N` pick a free one"
                              : "") +
                      (timed_out ? " within " + std::to_string(ElapsedMs(start)) + " ms" + timeout_text
                                 : " [" + m + "]"));
    }
    // c10d giving up before the deadline has a reason of its own (a name that does not resolve).
    throw DistError(who + "cannot reach the TCPStore at " + where + " within " + std::to_string(ElapsedMs(start)) +
                    " ms" + timeout_text + (timed_out ? "" : ": " + FirstLine(m)) + "; " +
                    (world.use_agent_store ? "torchrun's agent serves it; is the agent still running?"
                                           : "is rank 0 running, and are MASTER_ADDR/MASTER_PORT the same on every rank?"));
  }

  impl->pids.assign(world.world_size, 0);
  impl->pids[world.rank] = static_cast<int>(getpid());
  impl->hosts.assign(world.world_size, "?");
  impl->hosts[world.rank] = HostName();
  if (world.world_size > 1) {
    // Every rank claims its rank, then publishes its host, pid and job: a failed collective can
    // then name its peers and their hosts (and the same-host ones that are gone), the
    // shared-memory transport knows who shares this host, and a rank of another job (two jobs on
    // one MASTER_PORT) is refused by name before anything else runs.
    auto t0 = Clock::now();
    std::vector<std::string> keys;
    for (int r = 0; r < world.world_size; ++r) keys.push_back("weft/proc/" + std::to_string(r));
    std::vector<ProcRecord> records(world.world_size);
    try {
      const std::string claim = "weft/claim/" + std::to_string(world.rank);
      if (impl->store->add(claim, 1) > 1) {
        std::string other;
        try {
          impl->store->wait({keys[world.rank]}, std::min(remaining(), std::chrono::milliseconds(2000)));
          other = " (" + ProcRecord::Parse(impl->store->get(keys[world.rank])).Name() + ")";
        } catch (const std::exception&) {
        }
        throw DistError(who + "another process" + other + " already joined the job at " + where + " as rank " +
                        std::to_string(world.rank) +
                        "; is a second job using the same MASTER_ADDR:MASTER_PORT? Give each job its own MASTER_PORT");
      }
      ProcRecord mine;
      mine.pid = static_cast<int>(getpid());
      mine.host = HostName();
      mine.identity = HostIdentity();
      mine.job = options.job;
      const std::string text = mine.Serialize();
      impl->store->set(keys[world.rank], std::vector<uint8_t>(text.begin(), text.end()));
      try {
        impl->store->wait(keys, remaining());
      } catch (const std::exception& e) {
        std::vector<int> missing;
        try {
          for (int r = 0; r < world.world_size; ++r) {
            if (!impl->store->check({keys[r]})) missing.push_back(r);
          }
        } catch (const std::exception&) {
        }
        const int64_t elapsed = ElapsedMs(start);
        const std::string& timeout = timeout_text;
        if (missing.empty() || Clock::now() + std::chrono::milliseconds(100) < deadline) {
          // The wait ended before its timeout, or the store no longer answers which ranks it
          // holds: the store itself went away (rank 0, which serves it, stopped).
          throw DistError(who + "the TCPStore on " + where + " stopped answering after " + std::to_string(elapsed) +
                          " ms, before every rank arrived" + timeout + ": " + FirstLine(e.what()) +
                          "; rank 0 serves it: see why rank 0 stopped");
        }
        std::string list;
        for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
        throw DistError(who + (missing.size() == 1 ? "rank " : "ranks ") + list + " of " +
                        std::to_string(world.world_size) + " did not arrive at the TCPStore on " + where + " within " +
                        std::to_string(elapsed) + " ms" + timeout +
                        "; are they started, with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE=" +
                        std::to_string(world.world_size) + "?");
      }
      for (int r = 0; r < world.world_size; ++r) {
        records[r] = ProcRecord::Parse(impl->store->get(keys[r]));
        impl->hosts[r] = records[r].host;
        if (records[r].identity == mine.identity) impl->pids[r] = records[r].pid;
      }
    } catch (const DistError&) {
      throw;
    } catch (const std::exception& e) {
      throw DistError(who + "the rendezvous at the TCPStore on " + where + " failed after " +
                      std::to_string(ElapsedMs(t0)) + " ms (timeout " + std::to_string(options.timeout.count()) +
                      " ms): " + BackendMessage(e) + " (a peer may have exited)");
    }
    try {
      CheckSameJob(world, where, records);
    } catch (const DistError&) {
      // Every rank compares the same records, so when one refuses the job all do. Rank 0 hosts the
      // store: its exit would take the records down before a slower rank has read them (that rank
      // would then say "connection reset" instead of what differs), so each other rank says it has
      // read them and rank 0 gives them a moment to.
      try {
        if (world.rank != 0) {
          impl->store->set("weft/read/" + std::to_string(world.rank), std::vector<uint8_t>{1});
        } else {
          std::vector<std::string> read;
          for (int r = 1; r < world.world_size; ++r) read.push_back("weft/read/" + std::to_string(r));
          impl->store->wait(read, std::min(options.timeout, std::chrono::milliseconds(2000)));
        }
      } catch (const std::exception&) {
      }
      throw;
    }
  }

  std::shared_ptr<gloo::transport::Device> device = GlooDevice(world);

  // Waiting ranks poll shared memory only when every busy thread of this host has its own core.
  const int64_t busy_threads = int64_t{std::max(1, world.local_world_size)} * at::get_num_threads();
  const std::chrono::microseconds spin(busy_threads <= static_cast<int64_t>(std::thread::hardware_concurrency()) ? 50
                                                                                                                 : 0);
  std::vector<std::shared_ptr<Backend>> made;
  for (Axis axis : kAllAxes) {
    AxisGroup& g = impl->Group(axis);
    g.ranks = mesh.GroupRanks(world.rank, axis);
    g.axis_rank = mesh.AxisRank(world.rank, axis);
    GroupPeers peers;
    for (int r : g.ranks) {
      if (r != world.rank) peers.peers.push_back({r, impl->pids[r], impl->hosts[r]});
    }
    g.peers = std::make_shared<const GroupPeers>(std::move(peers));
    if (g.ranks.size() < 2) continue;
    // Axes with the same member list (e.g. ring == cp when ulysses = 1) share one group; the
    // weights' group never does (its gathers run on a thread of their own, runtime/dist/mesh.h).
    for (auto& b : made) {
      if (b->ranks == g.ranks && axis != Axis::kWeights && !b->own) g.backend = b;
    }
    if (g.backend) continue;
    auto b = std::make_shared<Backend>();
    b->ranks = g.ranks;
    const int size = static_cast<int>(g.ranks.size());
    const std::string prefix =
        std::string("weft/") + AxisName(axis) + "/" + std::to_string(mesh.GroupIndex(world.rank, axis));
    auto t0 = Clock::now();
    try {
      // Connecting the group's full mesh waits for what is left of the deadline; its
      // collectives then get the whole timeout.
      auto gopts = c10d::ProcessGroupGloo::Options::create(remaining());
      gopts->devices = {device};
      gopts->threads = 1;
      auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>(prefix, impl->store), g.axis_rank, size, gopts);
      gloo->setTimeout(options.timeout);
      b->gloo = gloo;
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
    b->own = axis == Axis::kWeights;
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

void DistContext::AllGatherInto(Axis axis, const at::Tensor& input, at::Tensor& out) {
  const char* op = CommOpName(CommOp::kAllGather);
  const int n = AxisSize(axis);
  const int64_t piece = input.numel();
  if (input.dim() != 1 || out.dim() != 1 || out.numel() != n * piece || !out.is_contiguous() ||
      out.scalar_type() != input.scalar_type()) {
    throw DistError(impl_->Context(axis, op) + ": gathering " + Describe(input) + " into " + Describe(out) +
                    "; both are flat, of one dtype, the output " + std::to_string(n) + " times the input");
  }
  std::vector<at::Tensor> recv;
  for (int j = 0; j < n; ++j) recv.push_back(out.narrow(0, j * piece, piece));
  if (n == 1) {
    recv[0].copy_(input);
    return;
  }
  const std::string shapes = "input " + Describe(input) + " (into a reused buffer)";
  if (ShmTransport* shm = impl_->Shm(axis, input)) {
    impl_->RunShm(axis, op, shapes, [&] { shm->Exchange(std::vector<at::Tensor>(n, input), recv); }, false);
    return;
  }
  std::vector<std::vector<at::Tensor>> outs{recv};
  std::vector<at::Tensor> ins{input.contiguous()};
  c10d::Backend& b = impl_->BackendFor(axis, ins[0], op);
  impl_->Run(axis, op, shapes, [&] { return b.allgather(outs, ins, c10d::AllgatherOptions{impl_->options.timeout}); },
             false);
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
  state->peers = impl_->Group(axis).peers;
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
    const std::string peers = DescribePeers(*state->peers);
    throw DistError(state->context + " failed posting " + where + " after " +
                    std::to_string(ElapsedMs(start)) + " ms: " + BackendMessage(e) +
                    (peers.empty() ? "" : "; " + peers) + kPeerHint);
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
