#include "runtime/dist/shm_transport.h"

#include "runtime/dist/world.h"

#include <dirent.h>
#include <fcntl.h>
#include <immintrin.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include <ATen/ATen.h>

namespace weft::dist {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x7765667473686d31ULL;  // "weftshm1"
constexpr int kSlots = 2;
constexpr int64_t kLine = 64;

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters need lock-free atomics");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory futex words need lock-free atomics");

struct alignas(kLine) SegmentHeader {
  uint64_t magic;
  int64_t size;
  int64_t piece_bytes;
};

struct alignas(kLine) RankWord {
  std::atomic<uint32_t> doorbell;  // futex word: bumped whenever a peer published or consumed for us
  std::atomic<uint32_t> sleepers;  // > 0 while this rank sleeps on the doorbell
};

struct alignas(kLine) Counter {
  std::atomic<uint64_t> value;
};

struct alignas(kLine) SlotHeader {
  int64_t message_bytes;  // the whole message this piece belongs to
  int64_t offset;         // where this piece starts in it
};

int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

int64_t ChannelBytes(int64_t piece) {
  return 2 * kLine + kSlots * (static_cast<int64_t>(sizeof(SlotHeader)) + RoundUp(piece, kLine));
}

int64_t SegmentBytes(int size, int64_t piece) {
  return static_cast<int64_t>(sizeof(SegmentHeader)) + size * static_cast<int64_t>(sizeof(RankWord)) +
         static_cast<int64_t>(size) * size * ChannelBytes(piece);
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string String(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

int64_t TensorBytes(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

// A view of `bytes` of raw memory with `like`'s shape and dtype, row-major.
at::Tensor ViewAs(void* data, const at::Tensor& like) {
  return at::from_blob(data, like.sizes(), like.options().device(at::kCPU));
}

}  // namespace

struct ShmTransport::Segment {
  void* base = nullptr;
  int64_t bytes = 0;
  int size = 0;
  int64_t piece = 0;

  ~Segment() {
    if (base) munmap(base, static_cast<size_t>(bytes));
  }
  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base); }
  RankWord* rank_word(int r) const {
    return reinterpret_cast<RankWord*>(static_cast<char*>(base) + sizeof(SegmentHeader)) + r;
  }
  char* channel(int from, int to) const {
    return static_cast<char*>(base) + sizeof(SegmentHeader) + size * sizeof(RankWord) +
           (static_cast<int64_t>(from) * size + to) * ChannelBytes(piece);
  }
  Counter* written(int from, int to) const { return reinterpret_cast<Counter*>(channel(from, to)); }
  Counter* consumed(int from, int to) const { return reinterpret_cast<Counter*>(channel(from, to) + kLine); }
  SlotHeader* slot(int from, int to, uint64_t k) const {
    char* first = channel(from, to) + 2 * kLine;
    return reinterpret_cast<SlotHeader*>(first + (k % kSlots) * (sizeof(SlotHeader) + RoundUp(piece, kLine)));
  }
  static char* data(SlotHeader* s) { return reinterpret_cast<char*>(s + 1); }
};

int64_t ShmPieceBytes(int size, int64_t budget_bytes) {
  if (size < 2) return 0;
  const int64_t slots = int64_t{2} * size * (size - 1);
  int64_t piece = std::min<int64_t>(int64_t{1} << 20, budget_bytes / slots);
  piece = std::max<int64_t>(int64_t{64} << 10, piece);
  return piece / 4096 * 4096;
}

void RemoveStaleShmSegments() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  while (const dirent* entry = readdir(dir)) {
    int pid = 0;
    if (std::sscanf(entry->d_name, "weft-%d-", &pid) != 1 || pid <= 0) continue;
    if (!ProcessGone(pid)) continue;  // its creator may still be rendezvousing
    struct stat st {};
    const std::string path = std::string("/dev/shm/") + entry->d_name;
    if (stat(path.c_str(), &st) != 0 || std::time(nullptr) - st.st_mtime < 60) continue;
    shm_unlink((std::string("/") + entry->d_name).c_str());
  }
  closedir(dir);
}

namespace {

// Makes (rank 0) or maps (others) the segment; "" on success, else why not.
std::string MakeSegment(ShmTransport::Segment& seg, c10d::Store& store, int rank, int size, int64_t piece) {
  seg.size = size;
  seg.piece = piece;
  seg.bytes = SegmentBytes(size, piece);
  std::string name;
  if (rank == 0) {
    RemoveStaleShmSegments();
    std::random_device rd;
    name = "/weft-" + std::to_string(getpid()) + "-" + std::to_string(rd()) + std::to_string(rd());
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    std::string err;
    if (fd < 0) {
      err = Errno("shm_open");
    } else {
      int rc = posix_fallocate(fd, 0, seg.bytes);  // reserve now: a full /dev/shm fails here, not with SIGBUS later
      if (rc != 0) {
        errno = rc;
        err = Errno(("reserving " + std::to_string(seg.bytes) + " bytes in /dev/shm").c_str());
      } else {
        seg.base = mmap(nullptr, static_cast<size_t>(seg.bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (seg.base == MAP_FAILED) {
          seg.base = nullptr;
          err = Errno("mmap");
        }
      }
      close(fd);
    }
    if (!err.empty()) {
      if (fd >= 0) shm_unlink(name.c_str());
      store.set("shm/name", Bytes("!" + err));
      return err;
    }
    // tmpfs pages start zeroed: every counter is 0, no slot is written.
    SegmentHeader* h = seg.header();
    h->size = size;
    h->piece_bytes = piece;
    std::atomic_thread_fence(std::memory_order_release);
    h->magic = kMagic;
    store.set("shm/name", Bytes(name));
    return "";
  }
  name = String(store.get("shm/name"));
  if (!name.empty() && name[0] == '!') return "group rank 0 could not create the segment: " + name.substr(1);
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Errno(("shm_open " + name).c_str());
  seg.base = mmap(nullptr, static_cast<size_t>(seg.bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (seg.base == MAP_FAILED) {
    seg.base = nullptr;
    return Errno("mmap");
  }
  const SegmentHeader* h = seg.header();
  if (h->magic != kMagic || h->size != size || h->piece_bytes != piece) {
    return "segment " + name + " does not have the expected header";
  }
  return "";
}

}  // namespace

std::unique_ptr<ShmTransport> ShmTransport::Create(c10d::Store& store, int rank, int size, int64_t budget_bytes,
                                                   std::chrono::milliseconds timeout, std::chrono::microseconds spin,
                                                   const std::vector<int>& pids, std::string* why_not) {
  auto no = [&](const std::string& why) -> std::unique_ptr<ShmTransport> {
    if (why_not) *why_not = why;
    return nullptr;
  };
  try {
    // 1. Agree on whether to try: every rank willing, the smallest budget. Every rank decides
    // from the same published budgets and the same pid table, so all decide alike.
    store.set("shm/budget/" + std::to_string(rank), Bytes(std::to_string(budget_bytes)));
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("shm/budget/" + std::to_string(r));
    store.wait(keys, timeout);
    int64_t budget = budget_bytes;
    int refusing = -1;  // a rank whose budget is 0
    for (int r = 0; r < size; ++r) {
      const int64_t b = std::stoll(String(store.get(keys[r])));
      if (b <= 0 && refusing < 0) refusing = r;
      budget = std::min<int64_t>(budget, b);
    }
    if (budget_bytes <= 0) return no("shared memory is turned off");
    if (refusing >= 0) return no("shared memory is turned off on group rank " + std::to_string(refusing));
    if (static_cast<int>(pids.size()) != size || std::any_of(pids.begin(), pids.end(), [](int p) { return p <= 0; })) {
      return no("the group's ranks run on more than one host");
    }

    // 2. Rank 0 creates the segment, the others map it; 3. everyone reports and reads all reports.
    auto seg = std::make_unique<Segment>();
    std::string err = MakeSegment(*seg, store, rank, size, ShmPieceBytes(size, budget));
    store.set("shm/ok/" + std::to_string(rank), Bytes(err.empty() ? "1" : "!" + err));
    keys.clear();
    for (int r = 0; r < size; ++r) keys.push_back("shm/ok/" + std::to_string(r));
    store.wait(keys, timeout);
    std::string failure;
    for (int r = 0; r < size && failure.empty(); ++r) {
      std::string v = String(store.get(keys[r]));
      if (v != "1") failure = "group rank " + std::to_string(r) + ": " + v.substr(1);
    }
    if (rank == 0 && seg->base) {
      // Every rank has mapped it (or given up): drop the name so nothing is left in /dev/shm,
      // whatever happens to the processes later. The mappings keep the memory alive.
      std::string name = String(store.get("shm/name"));
      if (!name.empty() && name[0] != '!') shm_unlink(name.c_str());
    }
    if (!failure.empty()) return no(failure);
    return std::unique_ptr<ShmTransport>(new ShmTransport(std::move(seg), rank, size, timeout, spin, pids));
  } catch (const std::exception& e) {
    throw ShmError(std::string("shared-memory rendezvous failed: ") + e.what());
  }
}

ShmTransport::ShmTransport(std::unique_ptr<Segment> segment, int rank, int size, std::chrono::milliseconds timeout,
                           std::chrono::microseconds spin, std::vector<int> pids)
    : seg_(std::move(segment)),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      spin_(spin),
      pids_(std::move(pids)),
      sent_(size, 0),
      received_(size, 0) {}

ShmTransport::~ShmTransport() = default;

int64_t ShmTransport::piece_bytes() const { return seg_->piece; }

namespace {

// One direction of one pair during an Exchange.
struct Flow {
  int64_t bytes = 0;          // message size
  int64_t done = 0;           // bytes moved so far
  bool finished = false;
  at::Tensor user;            // the caller's tensor (source or destination)
  at::Tensor staging;         // contiguous copy when the message spans several pieces
};

void Ring(ShmTransport::Segment& seg, int peer) {
  RankWord* w = seg.rank_word(peer);
  w->doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (w->sleepers.load(std::memory_order_seq_cst) > 0) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&w->doorbell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

}  // namespace

void ShmTransport::Exchange(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& recv) {
  if (broken_) throw ShmError("the shared-memory transport is unusable after an earlier failure");
  const int n = size_, me = rank_;
  Segment& seg = *seg_;
  const int64_t piece = seg.piece;
  if (static_cast<int>(send.size()) != n || static_cast<int>(recv.size()) != n) {
    throw ShmError("Exchange needs one send and one recv tensor per rank");
  }
  if (TensorBytes(send[me]) != TensorBytes(recv[me])) {
    throw ShmError("local piece has " + std::to_string(TensorBytes(send[me])) + " bytes but its buffer " +
                   std::to_string(TensorBytes(recv[me])));
  }
  if (TensorBytes(send[me]) > 0) {
    recv[me].copy_(send[me].sizes() == recv[me].sizes() ? send[me] : send[me].reshape(recv[me].sizes()));
  }

  std::vector<Flow> out(n), in(n);
  int pending = 0;
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    out[j].bytes = TensorBytes(send[j]);
    out[j].user = send[j];
    if (out[j].bytes > piece) {
      // An all-gather sends one tensor to everyone: make it contiguous once, not once per peer.
      for (int i = 0; i < j && !out[j].staging.defined(); ++i) {
        if (i != me && send[i].defined() && send[i].is_same(send[j])) out[j].staging = out[i].staging;
      }
      if (!out[j].staging.defined()) out[j].staging = send[j].contiguous();
    }
    in[j].bytes = TensorBytes(recv[j]);
    in[j].user = recv[j];
    if (in[j].bytes > piece) {
      in[j].staging = recv[j].is_contiguous() ? recv[j] : at::empty(recv[j].sizes(), recv[j].options());
    }
    pending += 2;
  }

  auto try_send = [&](int j) {
    Flow& f = out[j];
    const uint64_t k = sent_[j];
    if (k - seg.consumed(me, j)->value.load(std::memory_order_acquire) >= kSlots) return false;
    SlotHeader* s = seg.slot(me, j, k);
    const int64_t len = std::min(piece, f.bytes - f.done);
    s->message_bytes = f.bytes;
    s->offset = f.done;
    if (len > 0) {
      if (f.staging.defined()) {
        std::memcpy(Segment::data(s), static_cast<const char*>(f.staging.data_ptr()) + f.done, len);
      } else if (f.user.is_contiguous()) {
        std::memcpy(Segment::data(s), f.user.data_ptr(), len);
      } else {
        ViewAs(Segment::data(s), f.user).copy_(f.user);
      }
    }
    seg.written(me, j)->value.store(k + 1, std::memory_order_release);
    sent_[j] = k + 1;
    f.done += len;
    f.finished = f.done >= f.bytes;
    Ring(seg, j);
    return true;
  };
  auto try_recv = [&](int j) {
    Flow& f = in[j];
    const uint64_t k = received_[j];
    if (seg.written(j, me)->value.load(std::memory_order_acquire) <= k) return false;
    SlotHeader* s = seg.slot(j, me, k);
    if (s->message_bytes != f.bytes || s->offset != f.done) {
      throw ShmError("group rank " + std::to_string(j) + " sent " + std::to_string(s->message_bytes) +
                     " bytes but this rank expects " + std::to_string(f.bytes) +
                     " (the ranks' shapes or splits disagree)", {j});
    }
    const int64_t len = std::min(piece, f.bytes - f.done);
    if (len > 0) {
      if (f.staging.defined()) {
        std::memcpy(static_cast<char*>(f.staging.data_ptr()) + f.done, Segment::data(s), len);
      } else if (f.user.is_contiguous()) {
        std::memcpy(f.user.data_ptr(), Segment::data(s), len);
      } else {
        f.user.copy_(ViewAs(Segment::data(s), f.user));
      }
    }
    seg.consumed(j, me)->value.store(k + 1, std::memory_order_release);
    received_[j] = k + 1;
    f.done += len;
    f.finished = f.done >= f.bytes;
    if (f.finished && f.staging.defined() && !f.staging.is_same(f.user)) f.user.copy_(f.staging);
    Ring(seg, j);
    return true;
  };

  RankWord* mine = seg.rank_word(me);
  std::vector<bool> gone(n, false);  // seen exited in an earlier quiet slice
  const auto start = Clock::now();
  try {
    while (pending > 0) {
      const uint32_t bell = mine->doorbell.load(std::memory_order_seq_cst);
      bool progressed = false;
      for (int j = 0; j < n; ++j) {
        if (j == me) continue;
        if (!out[j].finished && try_send(j)) {
          progressed = true;
          if (out[j].finished) --pending;
        }
        if (!in[j].finished && try_recv(j)) {
          progressed = true;
          if (in[j].finished) --pending;
        }
      }
      if (progressed) continue;
      // Nothing to do until a peer rings: spin a little (it is usually about to), then sleep.
      if (spin_.count() > 0) {
        bool rang = false;
        const auto until = Clock::now() + spin_;
        while (!rang && Clock::now() < until) {
          for (int i = 0; i < 32 && !rang; ++i) {
            _mm_pause();
            rang = mine->doorbell.load(std::memory_order_relaxed) != bell;
          }
        }
        if (rang) continue;
      }
      mine->sleepers.fetch_add(1, std::memory_order_seq_cst);
      timespec slice{0, 50 * 1000 * 1000};
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&mine->doorbell), FUTEX_WAIT, bell, &slice, nullptr, 0);
      mine->sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (mine->doorbell.load(std::memory_order_seq_cst) != bell) continue;
      // A quiet slice: is a peer we still need gone, or is the time up? A peer seen gone gets
      // one more pass, since its last pieces may still sit in the channel.
      for (int j = 0; j < n; ++j) {
        if (j == me || (out[j].finished && in[j].finished)) continue;
        if (!ProcessGone(pids_[j])) continue;
        if (!gone[j]) {
          gone[j] = true;
          continue;
        }
        throw ShmError("group rank " + std::to_string(j) + " (pid " + std::to_string(pids_[j]) +
                       ") exited before this exchange finished (sent it " + std::to_string(out[j].done) + " of " +
                       std::to_string(out[j].bytes) + " bytes, received " + std::to_string(in[j].done) + " of " +
                       std::to_string(in[j].bytes) + ")", {j});
      }
      if (Clock::now() - start > timeout_) {
        std::string waiting;
        std::vector<int> peers;
        for (int j = 0; j < n; ++j) {
          if (j != me && !(out[j].finished && in[j].finished)) {
            waiting += (waiting.empty() ? "" : ", ") + std::to_string(j);
            peers.push_back(j);
          }
        }
        throw ShmError("timed out waiting for group rank(s) " + waiting, std::move(peers));
      }
    }
  } catch (...) {
    broken_ = true;
    throw;
  }
}

}  // namespace weft::dist
