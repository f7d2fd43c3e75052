// attention_bench: context-parallel attention modes on local CPU ranks (Gloo) against local
// attention on the full sequence in one process. Not a test.
//
//   attention_bench [--nproc 2,4] [--seq 4096,16384] [--heads 24] [--head-dim 128]
//                   [--iters 3] [--warmup 1] [--dtype fp32|bf16]
//
// The launcher process runs nothing in torch itself: for every sequence length it starts the
// local baseline (1 rank, all cores) and then each --nproc world (cores / nproc intra-op
// threads per rank) as child processes of this same binary, collects their RESULT lines and
// prints one markdown table. Per mode and rank: wall time of one call (median over iters,
// barrier to barrier, so the slowest rank counts), collective calls and bytes sent (from
// runtime/dist's counters; max over ranks) against the closed form of peers-and-limits.md (c),
// and the peak of live CPU tensor bytes during the call above what was live before it (a
// counting allocator wrapped around LibTorch's CPU allocator; max over ranks).

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/attention/attention.h"
#include "runtime/dist/dist_context.h"
#include "runtime/dist/launcher.h"
#include "runtime/dist/world.h"

namespace {

using weft::dist::Axis;
using weft::dist::DistContext;
using namespace weft::runtime;

// Counts live and peak bytes of every CPU tensor allocation.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    auto* holder = new Holder{std::move(inner), n, this};
    const int64_t live = live_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = peak_.load();
    while (live > peak && !peak_.compare_exchange_weak(peak, live)) {
    }
    return {data, holder, &Release, device};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  int64_t live() const { return live_.load(); }
  int64_t peak() const { return peak_.load(); }
  void ResetPeak() { peak_.store(live_.load()); }

 private:
  struct Holder {
    c10::DataPtr inner;
    size_t bytes;
    CountingAllocator* owner;
  };
  static void Release(void* p) {
    auto* h = static_cast<Holder*>(p);
    h->owner->live_.fetch_sub(static_cast<int64_t>(h->bytes));
    delete h;
  }
  c10::Allocator* base_;
  std::atomic<int64_t> live_{0}, peak_{0};
};

struct Args {
  std::vector<int> nproc{2, 4};
  std::vector<int64_t> seq{4096, 16384};
  int64_t heads = 24, head_dim = 128, batch = 1;
  int iters = 3, warmup = 1;
  std::string dtype = "fp32";
};

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
  return out;
}

Args ParseArgs(int argc, char** argv, bool* rank_mode, int64_t* rank_seq) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "attention_bench: " << k << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--nproc") {
      a.nproc.clear();
      for (int64_t n : ParseList(next())) a.nproc.push_back(static_cast<int>(n));
    } else if (k == "--seq") {
      a.seq = ParseList(next());
    } else if (k == "--heads") {
      a.heads = std::stoll(next());
    } else if (k == "--head-dim") {
      a.head_dim = std::stoll(next());
    } else if (k == "--batch") {
      a.batch = std::stoll(next());
    } else if (k == "--iters") {
      a.iters = std::stoi(next());
    } else if (k == "--warmup") {
      a.warmup = std::stoi(next());
    } else if (k == "--dtype") {
      a.dtype = next();
    } else if (k == "--rank-seq") {
      *rank_mode = true;
      *rank_seq = std::stoll(next());
    } else {
      std::cerr << "usage: attention_bench [--nproc 2,4] [--seq 4096,16384] [--heads 24]"
                   " [--head-dim 128] [--batch 1] [--iters 3] [--warmup 1] [--dtype fp32|bf16]\n";
      std::exit(k == "--help" || k == "-h" ? 0 : 2);
    }
  }
  return a;
}

struct ModeRun {
  std::string name;
  CpMode mode;
  Axis axis;  // for ulysses / ring alone: the flattened CP axis
  RingRotate rotate;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One rank of one world (or the single-process baseline when the world has one rank).
int RankMain(const Args& a, int64_t seq) {
  const weft::dist::WorldConfig world = weft::dist::WorldFromEnv();
  weft::dist::ConfigureIntraOpThreads(world.local_world_size);
  static CountingAllocator counting(c10::GetCPUAllocator());
  c10::SetCPUAllocator(&counting, /*priority=*/100);

  const int p = world.world_size;
  weft::dist::MeshShape mesh;
  if (p >= 4 && p % 2 == 0) {
    mesh.ring = 2, mesh.ulysses = p / 2;
  } else {
    mesh.ulysses = p;
  }
  weft::dist::DistOptions options;
  options.timeout = std::chrono::minutes(10);
  auto ctx = DistContext::Create(world, mesh, options);
  const at::ScalarType dtype = a.dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  const int64_t elem = static_cast<int64_t>(c10::elementSize(dtype));
  const int cp_rank = ctx->AxisRank(Axis::kCp);
  const int64_t local_len = SplitSizes(seq, p)[cp_rank];
  at::manual_seed(7 + cp_rank);
  const at::Tensor q = at::randn({a.batch, local_len, a.heads, a.head_dim}).to(dtype);
  const at::Tensor k = at::randn_like(q), v = at::randn_like(q);

  std::vector<ModeRun> modes;
  if (p == 1) {
    modes.push_back({"local (full sequence)", CpMode::kLocal, Axis::kCp, RingRotate::kAllGather});
  } else {
    modes.push_back({"ulysses", CpMode::kUlysses, Axis::kCp, RingRotate::kAllGather});
    modes.push_back({"ring allgather", CpMode::kRing, Axis::kCp, RingRotate::kAllGather});
    modes.push_back({"ring p2p", CpMode::kRing, Axis::kCp, RingRotate::kP2p});
    if (mesh.ring > 1 && mesh.ulysses > 1) {
      modes.push_back({"usp allgather", CpMode::kUsp, Axis::kCp, RingRotate::kAllGather});
      modes.push_back({"usp p2p", CpMode::kUsp, Axis::kCp, RingRotate::kP2p});
    }
  }

  for (const ModeRun& m : modes) {
    CpAttentionOptions o;
    o.rotate = m.rotate;
    auto call = [&] {
      switch (m.mode) {
        case CpMode::kLocal: return LocalAttention(q, k, v, std::nullopt).out;
        case CpMode::kUlysses: return UlyssesAttention(*ctx, q, k, v, std::nullopt, o, m.axis).out;
        case CpMode::kRing: return RingAttention(*ctx, q, k, v, std::nullopt, o, m.axis).out;
        case CpMode::kUsp: return UspAttention(*ctx, q, k, v, std::nullopt, o).out;
      }
      return at::Tensor();
    };
    for (int i = 0; i < a.warmup; ++i) call();
    std::vector<double> times;
    int64_t calls = 0, bytes = 0, peak = 0;
    for (int i = 0; i < a.iters; ++i) {
      ctx->Barrier(Axis::kWorld);
      const weft::dist::CommCounters before = ctx->counters();
      counting.ResetPeak();
      const int64_t live_before = counting.live();
      const auto t0 = std::chrono::steady_clock::now();
      at::Tensor out = call();
      const int64_t my_peak = counting.peak() - live_before;
      const weft::dist::CommStat used_total = ctx->counters().Total();
      const weft::dist::CommStat before_total = before.Total();
      ctx->Barrier(Axis::kWorld);
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      calls = used_total.calls - before_total.calls;
      bytes = used_total.bytes_sent - before_total.bytes_sent;
      peak = std::max(peak, my_peak);
    }
    // Max over ranks of bytes sent and peak memory.
    at::Tensor stats = at::tensor({bytes, peak, calls}, at::kLong);
    if (p > 1) ctx->AllReduce(Axis::kWorld, stats, weft::dist::ReduceKind::kMax);
    const int64_t formula =
        m.mode == CpMode::kUsp
            ? FormulaBytes(m.mode, mesh.ring, mesh.ulysses, a.batch, seq, a.heads, a.head_dim, elem)
            : FormulaBytes(m.mode, p, p, a.batch, seq, a.heads, a.head_dim, elem);
    if (world.rank == 0) {
      std::cout << "RESULT\t" << seq << "\t" << p << "\t" << m.name << "\t" << Median(times)
                << "\t" << stats[2].item<int64_t>() << "\t" << stats[0].item<int64_t>() << "\t"
                << formula << "\t" << stats[1].item<int64_t>() << std::endl;
    }
  }
  ctx->Barrier(Axis::kWorld);
  return 0;
}

std::string Mib(int64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.1f", static_cast<double>(bytes) / (1 << 20));
  return s;
}

int LauncherMain(const Args& a, char** argv, int argc) {
  std::vector<std::string> base{weft::dist::SelfExecutable("attention_bench")};
  for (int i = 1; i < argc; ++i) base.push_back(argv[i]);
  struct Row {
    int64_t seq;
    int p;
    std::string mode;
    double ms;
    int64_t calls, bytes, formula, peak;
  };
  std::vector<Row> rows;
  std::map<int64_t, double> local_ms;
  double load_start[3] = {0, 0, 0};
  ::getloadavg(load_start, 3);
  for (int64_t seq : a.seq) {
    std::vector<int> worlds{1};
    worlds.insert(worlds.end(), a.nproc.begin(), a.nproc.end());
    for (int p : worlds) {
      std::cerr << "attention_bench: S=" << seq << " ranks=" << p << " ..." << std::endl;
      weft::dist::LaunchOptions lo;
      lo.nproc = p;
      lo.argv = base;
      lo.argv.push_back("--rank-seq");
      lo.argv.push_back(std::to_string(seq));
      std::ostringstream out;
      lo.out = &out;
      lo.prefix_output = true;
      const weft::dist::LaunchResult r = weft::dist::Launch(lo);
      if (r.exit_code != 0) {
        std::cerr << "attention_bench: " << r.failure << "\n" << out.str();
        return 1;
      }
      std::istringstream lines(out.str());
      std::string line;
      while (std::getline(lines, line)) {
        const size_t at = line.find("RESULT\t");
        if (at == std::string::npos) continue;
        std::istringstream f(line.substr(at + 7));
        Row row;
        std::string field;
        std::getline(f, field, '\t');
        row.seq = std::stoll(field);
        std::getline(f, field, '\t');
        row.p = std::stoi(field);
        std::getline(f, row.mode, '\t');
        f >> row.ms >> row.calls >> row.bytes >> row.formula >> row.peak;
        if (row.p == 1) local_ms[row.seq] = row.ms;
        rows.push_back(row);
        std::cerr << "  " << row.mode << ": " << row.ms << " ms" << std::endl;
      }
    }
  }
  double load_end[3] = {0, 0, 0};
  ::getloadavg(load_end, 3);
  std::printf("B=%lld H=%lld D=%lld dtype=%s, %u cores, iters=%d (median), warmup=%d; "
              "1-min load average %.1f at start, %.1f at end (other work on the machine skews "
              "times, not bytes or memory)\n\n",
              static_cast<long long>(a.batch), static_cast<long long>(a.heads),
              static_cast<long long>(a.head_dim), a.dtype.c_str(),
              std::max(1u, static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN))), a.iters,
              a.warmup, load_start[0], load_end[0]);
  std::printf("| S | ranks | mode | time ms | vs local | calls | bytes sent/rank (max) | formula "
              "min | bytes/formula | peak tensor MiB/rank (max) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    const double ratio = local_ms.count(r.seq) ? r.ms / local_ms[r.seq] : 0.0;
    char bf[32] = "-";
    if (r.formula > 0) std::snprintf(bf, sizeof(bf), "%.6f", double(r.bytes) / r.formula);
    std::printf("| %lld | %d | %s | %.1f | %.2fx | %lld | %lld | %lld | %s | %s |\n",
                static_cast<long long>(r.seq), r.p, r.mode.c_str(), r.ms, ratio,
                static_cast<long long>(r.calls), static_cast<long long>(r.bytes),
                static_cast<long long>(r.formula), bf, Mib(r.peak).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool rank_mode = false;
  int64_t rank_seq = 0;
  const Args a = ParseArgs(argc, argv, &rank_mode, &rank_seq);
  try {
    if (rank_mode) return RankMain(a, rank_seq);
    return LauncherMain(a, argv, argc);
  } catch (const std::exception& e) {
    std::cerr << "attention_bench: " << e.what() << "\n";
    return 1;
  }
}
