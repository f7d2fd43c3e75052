#include "executor/calibrate.h"

#include <malloc.h>
#include <stdlib.h>  // mkstemp
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <random>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "compiler/cost/machine_profile.h"
#include "compiler/source/output_file.h"
#include "executor/device.h"
#include "executor/host_memory.h"
#include "executor/job_identity.h"
#include "runtime/dist/dist_context.h"
#include "runtime/dist/launcher.h"
#include "runtime/dist/world.h"
#include "runtime/nn/layers.h"
#include "runtime/nn/onednn_linear.h"

namespace weft::exec {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using cost::RatePoint;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int Cores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

// Resident bytes now (/proc/self/statm), not the peak PeakRssBytes reports: the profile wants
// what a rank holds at given moments. It counts what a run's peak_rss_bytes counts, LibTorch's
// shared library pages included (about half of a rank's), so predictions compare with reports.
// Freed heap is handed back first, so that memory the measurements freed does not pass for the
// transport's.
int64_t CurrentRssBytes() {
  malloc_trim(0);
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

// How long one call of `fn` takes: one untimed call first (packs weights, faults pages in),
// then trials of as many calls as fill a fifth of `budget_s` each, at least 3 trials and at
// most 7; the median of the trials' per-call times. A call longer than the budget is timed 3
// times, alone. `sync` waits for the work the calls queued on the device (a GPU runs them
// asynchronously): after the untimed call and at the end of each trial, so a trial's time is
// its calls' whole run.
double TimePerCall(const std::function<void()>& fn, double budget_s, const std::function<void()>& sync) {
  fn();
  sync();
  const Clock::time_point start = Clock::now();
  fn();
  sync();
  const double first = Seconds(start, Clock::now());
  std::vector<double> per_call{first};
  const int reps = static_cast<int>(std::clamp(budget_s / 5 / std::max(first, 1e-9), 1.0, 1e5));
  while (per_call.size() < 3 || (per_call.size() < 7 && Seconds(start, Clock::now()) < budget_s)) {
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    sync();
    per_call.push_back(Seconds(t0, Clock::now()) / reps);
  }
  return Median(per_call);
}

struct MatmulSize {
  int64_t m, n, k;
};

// The launcher's compute measurements on `device` (the CPU at each thread count of `threads`, or
// this process's GPU).
class ComputeCalibration {
 public:
  ComputeCalibration(bool quick, std::vector<int> threads, c10::Device device)
      : quick_(quick), threads_(std::move(threads)), device_(device) {}

  // A Linear of the program as the interpreter runs it (runtime/program/fast_kernels.cpp): f32 on
  // oneDNN with the weight packed once where this LibTorch has it, anything else on at::linear.
  // Token counts and widths like the models' (Flux, Wan: 64..3072 features, 256..4096 tokens on a
  // CPU; on a GPU up to Flux's 4096 image tokens x its 12288-wide MLP, where its rate peaks).
  std::vector<RatePoint> Matmul() {
    std::vector<MatmulSize> sizes =
        quick_ ? std::vector<MatmulSize>{{256, 64, 64}, {1024, 512, 512}}
               : std::vector<MatmulSize>{{256, 64, 64}, {1024, 512, 512}, {2048, 1024, 1024}, {4096, 1536, 1536}};
    if (device_.is_cuda()) {
      sizes = quick_ ? std::vector<MatmulSize>{{1024, 512, 512}, {4096, 3072, 3072}}
                     : std::vector<MatmulSize>{{1024, 512, 512}, {4096, 3072, 3072}, {4096, 12288, 3072}, {16384, 3072, 12288}};
    }
    std::vector<RatePoint> points;
    for (const auto& [name, dtype] : Dtypes()) {
      for (int t : threads_) {
        at::set_num_threads(t);
        double last_rate = 0;
        for (const MatmulSize& s : sizes) {
          const double flops = 2.0 * s.m * s.n * s.k;
          if (TooLong(flops, last_rate, name, "matmul", t)) break;
          const at::Tensor x = Random({s.m, s.k}, dtype);
          const at::Tensor w = Random({s.n, s.k}, dtype);
          nn::Linear holder(s.k, s.n, /*bias=*/false);
          const bool packed = dtype == at::kFloat && !device_.is_cuda() && nn::onednn::Available();
          const double seconds = TimePerCall(
              [&] {
                const at::Tensor y = packed ? nn::onednn::Matmul(holder, w, x, 0, s.k, std::nullopt,
                                                                 nn::onednn::Epilogue::kNone)
                                            : at::linear(x, w);
                (void)y;
              },
              Budget(), Sync());
          last_rate = flops / seconds;
          points.push_back({name, t, static_cast<double>(s.m * s.n * s.k), last_rate});
        }
      }
    }
    return points;
  }

  // at::scaled_dot_product_attention on (1, 4, S, 64) on a CPU, what the models' attention calls;
  // on a GPU (1, 24, S, 128), Flux's heads, up to 16384 keys (f32 to 4096: its kernels are not
  // the flash ones, and the rate is for the rare fp32 export).
  std::vector<RatePoint> Attention() {
    const bool gpu = device_.is_cuda();
    const int64_t kB = 1, kH = gpu ? 24 : 4, kD = gpu ? 128 : 64;
    std::vector<RatePoint> points;
    for (const auto& [name, dtype] : Dtypes()) {
      std::vector<int64_t> lengths = quick_ ? std::vector<int64_t>{256, 1024} : std::vector<int64_t>{256, 1024, 4096};
      if (gpu && !quick_) lengths = dtype == at::kFloat ? std::vector<int64_t>{1024, 4096} : std::vector<int64_t>{1024, 4096, 16384};
      for (int t : threads_) {
        at::set_num_threads(t);
        double last_rate = 0;
        for (int64_t s : lengths) {
          const double flops = 4.0 * kB * s * s * kH * kD;
          if (TooLong(flops, last_rate, name, "attention", t)) break;
          const at::Tensor q = Random({kB, kH, s, kD}, dtype);
          const at::Tensor k = Random({kB, kH, s, kD}, dtype);
          const at::Tensor v = Random({kB, kH, s, kD}, dtype);
          const double seconds = TimePerCall(
              [&] {
                const at::Tensor o = at::scaled_dot_product_attention(q, k, v);
                (void)o;
              },
              Budget(), Sync());
          last_rate = flops / seconds;
          points.push_back({name, t, static_cast<double>(s), last_rate});
        }
      }
    }
    return points;
  }

  // Bytes read and written per second by a binary op into a new tensor (what the interpreter's
  // aten.add and aten.mul do): the mean of add's and mul's rates, at inputs of 64 KB, 1 MB and
  // 16 MB each (quick: the first two; a GPU also 256 MB, past its caches); `size` is the bytes one
  // call moves (3 tensors).
  std::vector<RatePoint> Elementwise() {
    std::vector<int64_t> input_bytes = quick_ ? std::vector<int64_t>{64 << 10, 1 << 20}
                                              : std::vector<int64_t>{64 << 10, 1 << 20, 16 << 20};
    if (device_.is_cuda() && !quick_) input_bytes.push_back(int64_t{256} << 20);
    std::vector<RatePoint> points;
    for (const auto& [name, dtype] : Dtypes()) {
      for (int t : threads_) {
        at::set_num_threads(t);
        for (int64_t bytes : input_bytes) {
          const int64_t numel = bytes / at::elementSize(dtype);
          const at::Tensor a = Random({numel}, dtype);
          const at::Tensor b = Random({numel}, dtype);
          const double moved = 3.0 * bytes;
          const double add = moved / TimePerCall([&] { (void)at::add(a, b); }, Budget() / 2, Sync());
          const double mul = moved / TimePerCall([&] { (void)at::mul(a, b); }, Budget() / 2, Sync());
          points.push_back({name, t, moved, (add + mul) / 2});
        }
      }
    }
    return points;
  }

  // The dispatcher's cost of one tiny operator: at::add of 8 floats, median per call over 20
  // batches of 1000 calls (quick: 5), on one thread; on a GPU the launch of its kernel (the
  // batch waits for the GPU at its end).
  double OpOverhead() {
    at::set_num_threads(1);
    const at::Tensor a = Random({8}, at::kFloat);
    const at::Tensor b = Random({8}, at::kFloat);
    for (int i = 0; i < 1000; ++i) (void)at::add(a, b);
    SynchronizeDevice(device_);
    std::vector<double> per_call;
    for (int batch = 0; batch < (quick_ ? 5 : 20); ++batch) {
      const Clock::time_point t0 = Clock::now();
      for (int i = 0; i < 1000; ++i) (void)at::add(a, b);
      SynchronizeDevice(device_);
      per_call.push_back(Seconds(t0, Clock::now()) / 1000);
    }
    return Median(per_call);
  }

  const std::vector<std::string>& notes() const { return notes_; }

 private:
  static std::vector<std::pair<std::string, at::ScalarType>> Dtypes() { return {{"f32", at::kFloat}, {"bf16", at::kBFloat16}}; }

  at::Tensor Random(at::IntArrayRef sizes, at::ScalarType dtype) const {
    return at::randn(sizes, at::TensorOptions().dtype(dtype).device(device_));
  }

  std::function<void()> Sync() const {
    return [device = device_] { SynchronizeDevice(device); };
  }

  // Seconds one measurement may take: enough calls for a stable median, and the whole run in
  // minutes (seconds with --quick).
  double Budget() const { return quick_ ? 0.04 : 0.15; }

  // A size the previous (smaller) size's rate says would take over 2 s a call is not measured:
  // RateAt clamps at the largest size measured. Noted in the summary.
  bool TooLong(double flops, double last_rate, const std::string& dtype, const char* what, int threads) {
    if (last_rate <= 0 || flops / last_rate <= 2.0) return false;
    notes_.push_back(std::string(what) + " " + dtype + " at " + std::to_string(threads) +
                     " thread(s): larger sizes skipped (over 2 s a call at " +
                     std::to_string(static_cast<int>(last_rate / 1e9)) + " GFLOP/s)");
    return true;
  }

  bool quick_;
  std::vector<int> threads_;
  c10::Device device_;
  std::vector<std::string> notes_;
};

// ---- collectives ------------------------------------------------------------------------------

constexpr const char* kCollectiveOps[] = {"all_to_all", "all_gather", "all_reduce", "send_recv"};

// Bytes per rank of each collective's input (quick: 3 sizes up to 1 MB). NCCL over NVLink reaches
// its bandwidth only with messages of tens of MB: on a GPU up to 256 MB.
std::vector<int64_t> CollectiveSizes(bool quick, bool gpu) {
  if (gpu) {
    if (quick) return {16 << 10, 1 << 20, 16 << 20};
    return {16 << 10, 1 << 20, 16 << 20, 64 << 20, int64_t{256} << 20};
  }
  if (quick) return {1 << 10, 32 << 10, 1 << 20};
  return {1 << 10, 16 << 10, 256 << 10, 2 << 20, 8 << 20};
}

// seconds = alpha + bytes / beta, least squares weighted by 1 / seconds^2 (relative error): plain
// least squares over 1 KB .. 8 MB is the largest sizes' fit alone and leaves alpha, the small
// messages' whole cost, to noise. alpha >= 0 (refit through the origin when it comes out
// negative). When noise makes time fall with bytes, alpha is the fastest call and beta the
// largest size's bytes over its whole time: slower than the truth, never an unbounded beta.
std::pair<double, double> FitAlphaBeta(const std::vector<std::pair<double, double>>& bytes_seconds) {
  if (bytes_seconds.empty()) return {0, 1};
  double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : bytes_seconds) {
    const double w = 1 / std::max(y * y, 1e-30);
    s += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double det = s * sxx - sx * sx;
  double slope = det > 0 ? (s * sxy - sx * sy) / det : 0;
  double alpha = s > 0 ? (sy - slope * sx) / s : 0;
  if (alpha < 0) {
    alpha = 0;
    slope = sxx > 0 ? sxy / sxx : 0;
  }
  if (!(slope > 0)) {
    const auto largest = *std::max_element(bytes_seconds.begin(), bytes_seconds.end());
    double fastest = largest.second;
    for (const auto& xy : bytes_seconds) fastest = std::min(fastest, xy.second);
    return {fastest, std::max(largest.first, 1.0) / std::max(largest.second, 1e-12)};
  }
  return {alpha, 1 / slope};
}

// One rank job's measurements, as rank 0 wrote them.
struct GroupMeasurement {
  std::string transport;
  int ranks = 0;
  int64_t rank_base_bytes = 0;
  int64_t group_bytes = 0;
  // op -> (bytes per call, seconds per call) per size
  std::map<std::string, std::vector<std::pair<double, double>>> points;
};

GroupMeasurement ReadGroupMeasurement(const std::string& file) {
  std::ifstream in(file);
  const Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) throw std::runtime_error("calibration ranks wrote no measurements to `" + file + "`");
  GroupMeasurement g;
  g.transport = doc.at("transport").get<std::string>();
  g.ranks = doc.at("ranks").get<int>();
  g.rank_base_bytes = doc.at("rank_base_bytes").get<int64_t>();
  g.group_bytes = doc.at("group_bytes").get<int64_t>();
  for (const Json& p : doc.at("points")) {
    g.points[p.at("op").get<std::string>()].emplace_back(p.at("bytes").get<double>(), p.at("seconds").get<double>());
  }
  return g;
}

// Starts `n` ranks of this weft-run measuring collectives over `transport` (shm or gloo on CPU
// ranks; nccl: one GPU per rank); returns what rank 0 measured.
GroupMeasurement MeasureGroup(const CalibrateOptions& o, const std::string& transport, int n) {
  std::string file = (std::getenv("TMPDIR") != nullptr ? std::string(std::getenv("TMPDIR")) : "/tmp") +
                     "/weft-calibrate-XXXXXX";
  const int fd = ::mkstemp(file.data());
  if (fd < 0) throw std::runtime_error("cannot make a temporary file for the calibration ranks: " + file);
  ::close(fd);
  dist::LaunchOptions lo;
  lo.nproc = n;
  lo.argv = {dist::SelfExecutable("weft-run"), "--calibrate-collectives", file, "--timeout-ms",
             std::to_string(o.timeout.count())};
  if (transport == "nccl") {
    lo.argv.insert(lo.argv.end(), {"--device", "cuda"});
  } else {
    lo.argv.insert(lo.argv.end(), {"--cpu-transport", transport});
  }
  if (o.quick) lo.argv.push_back("--quick");
  std::random_device random;
  lo.env.emplace_back("WEFT_JOB_ID", dist::HostName() + "-" + std::to_string(::getpid()) + "-calibrate-" +
                                         std::to_string(random()));
  lo.threads_per_rank = 1;
  lo.error_channel = true;
  lo.pass_listen_fd = true;
  const dist::LaunchResult r = dist::Launch(lo);
  if (r.exit_code != 0) {
    ::unlink(file.c_str());
    throw std::runtime_error("collectives over " + transport + " on " + std::to_string(n) +
                             " ranks: " + (r.failure.empty() ? "the ranks failed" : r.failure));
  }
  GroupMeasurement g = ReadGroupMeasurement(file);
  ::unlink(file.c_str());
  return g;
}

// "model name" of /proc/cpuinfo, else "CPU".
std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    if (!name.empty()) return name;
  }
  return "CPU";
}

int64_t MemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

std::string Today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string Format(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

// The rate of `points` at (dtype, threads) at its largest size, for the summary.
const RatePoint* Largest(const std::vector<RatePoint>& points, const std::string& dtype, int threads) {
  const RatePoint* best = nullptr;
  for (const RatePoint& p : points) {
    if (p.dtype == dtype && p.threads == threads && (best == nullptr || p.size > best->size)) best = &p;
  }
  return best;
}

void PrintRates(std::ostream& out, const char* what, const std::vector<RatePoint>& points,
                const std::vector<int>& threads, double unit, const char* unit_name, const char* size_name) {
  for (const char* dtype : {"f32", "bf16"}) {
    std::string line = std::string("  ") + what + " " + dtype + ":";
    double size = 0;
    for (int t : threads) {
      const RatePoint* p = Largest(points, dtype, t);
      if (p == nullptr) continue;
      line += " " + std::to_string(t) + " thread" + (t == 1 ? "" : "s") + " " + Format("%.1f", p->rate / unit) +
              " " + unit_name + ",";
      size = p->size;
    }
    if (size == 0) continue;
    line.pop_back();
    out << line << "  (" << size_name << " " << Format("%.3g", size) << ")\n";
  }
}

}  // namespace

int RunCalibration(const CalibrateOptions& o, std::ostream& out) {
  const Clock::time_point start = Clock::now();
  // The launcher measures compute on the first GPU (SelectDevice refuses a build without CUDA or
  // a host without a GPU, by name) and starts one rank per GPU for the collectives.
  const c10::Device device = SelectDevice(o.device, dist::WorldConfig{});
  const bool gpu = device.is_cuda();
  const int cores = Cores();
  cost::MachineProfile m;
  m.kind = gpu ? "cuda" : "cpu";
  m.host = dist::HostName();
  m.measured = true;
  m.source = "weft-run --calibrate " + std::string(gpu ? "--device cuda " : "") + Today();
  if (gpu) {
    // A GPU profile counts GPUs where a CPU one counts cores (the ranks a host runs side by side)
    // and the memory of one GPU.
    m.cores = VisibleGpus();
    m.device = DeviceName(device) + " x" + std::to_string(m.cores);
    m.memory_bytes = DeviceMemoryBytes(device);
  } else {
    m.cores = cores;
    m.device = CpuModelName() + " x" + std::to_string(cores) + " cores";
    m.memory_bytes = MemTotalBytes();
  }

  std::vector<int> threads{1};
  if (!gpu && cores > 1) threads.push_back(cores);
  out << "weft-run --calibrate: " << m.device << " on " << m.host << (o.quick ? " (quick)" : "") << "\n";
  out.flush();
  ComputeCalibration compute(o.quick, threads, device);
  m.matmul = compute.Matmul();
  m.attention = compute.Attention();
  m.elementwise = compute.Elementwise();
  m.op_overhead_s = compute.OpOverhead();
  const double compute_s = Seconds(start, Clock::now());

  // Collectives: one rank job per (transport, group size).
  const int max_ranks = o.max_ranks > 0 ? o.max_ranks : gpu ? m.cores : std::min(8, 4 * cores);
  std::vector<GroupMeasurement> groups;
  std::vector<std::string> notes = compute.notes();
  if (gpu && max_ranks > m.cores) {
    throw std::runtime_error("--nproc " + std::to_string(max_ranks) + ": NCCL needs one GPU per rank and this host has " +
                             std::to_string(m.cores));
  }
  if (max_ranks < 2) {
    notes.push_back("--nproc " + std::to_string(max_ranks) + ": no collectives measured (they need 2 ranks or more)");
  } else if (const int64_t available = AvailableMemoryBytes();
             !gpu && available > 0 && static_cast<double>(max_ranks) * 300e6 > static_cast<double>(available)) {
    throw std::runtime_error("--nproc " + std::to_string(max_ranks) + ": " + std::to_string(max_ranks) +
                             " ranks need about " + Gb(max_ranks * 300e6) + " but this machine has " +
                             Gb(static_cast<double>(available)) + " available; use a smaller --nproc");
  }
  const std::vector<std::string> transports = gpu ? std::vector<std::string>{"nccl"} : std::vector<std::string>{"shm", "gloo"};
  for (const std::string& transport : transports) {
    for (int n = 2; n <= max_ranks; ++n) groups.push_back(MeasureGroup(o, transport, n));
  }
  if (gpu && !groups.empty()) {
    notes.push_back("the ranks' footprint and the groups' buffers are host memory (resident set sizes); NCCL's "
                    "device buffers are not counted");
  }
  for (const GroupMeasurement& g : groups) {
    for (const auto& [op, points] : g.points) {
      const auto [alpha, beta] = FitAlphaBeta(points);
      m.collectives.push_back({g.transport, op, g.ranks, alpha, beta});
    }
    // A rank's own footprint is the least any job saw (the others add their groups' buffers);
    // a group's, the most either transport added.
    if (m.rank_base_bytes == 0 || g.rank_base_bytes < m.rank_base_bytes) m.rank_base_bytes = g.rank_base_bytes;
    if (static_cast<int>(m.group_bytes.size()) < g.ranks - 1) m.group_bytes.resize(g.ranks - 1, 0);
    m.group_bytes[g.ranks - 2] = std::max(m.group_bytes[g.ranks - 2], g.group_bytes);
  }

  source::WriteFileOrThrow(o.out, cost::WriteMachineProfile(m));

  PrintRates(out, "matmul   ", m.matmul, threads, 1e9, "GFLOP/s", "m*n*k");
  PrintRates(out, "attention", m.attention, threads, 1e9, "GFLOP/s", "S");
  PrintRates(out, "elementwise", m.elementwise, threads, 1e9, "GB/s", "bytes/call");
  out << "  op overhead " << Format("%.2f", m.op_overhead_s * 1e6) << " us per tiny operator\n";
  if (!groups.empty()) {
    out << "  rank base " << Format("%.0f", m.rank_base_bytes / 1e6) << " MB; per group of n ranks:";
    for (size_t i = 0; i < m.group_bytes.size(); ++i) {
      out << " " << i + 2 << ": " << Format("%.1f", m.group_bytes[i] / 1e6) << " MB";
    }
    out << "\n  collectives (alpha + bytes / beta, bytes sent per rank per call):\n";
  }
  for (const GroupMeasurement& g : groups) {
    std::string line = "    " + g.transport + std::string(5 - g.transport.size(), ' ') + std::to_string(g.ranks) + " ranks:";
    for (const char* op : kCollectiveOps) {
      for (const cost::CollectiveFit& c : m.collectives) {
        if (c.transport == g.transport && c.ranks == g.ranks && c.op == op) {
          line += std::string(" ") + op + " " + Format("%.1f", c.alpha_s * 1e6) + " us + " +
                  Format("%.2f", c.beta_bytes_per_s / 1e9) + " GB/s;";
        }
      }
    }
    line.pop_back();
    out << line << "\n";
  }
  for (const std::string& note : notes) out << "  note: " << note << "\n";
  out << "wrote " << o.out << " in " << Format("%.1f", Seconds(start, Clock::now())) << " s (compute "
      << Format("%.1f", compute_s) << " s, collectives " << Format("%.1f", Seconds(start, Clock::now()) - compute_s)
      << " s)\n";
  return 0;
}

int RunCollectiveCalibrationRank(const CollectiveCalibrationOptions& o) {
  const dist::WorldConfig world = dist::WorldFromEnv();
  dist::ConfigureIntraOpThreads(world.local_world_size, 1);
  const c10::Device device = SelectDevice(o.device, world);
  dist::MeshShape shape;
  shape.ulysses = world.world_size;
  dist::DistOptions dopts;
  dopts.timeout = o.timeout;
  dopts.enable_nccl = device.is_cuda();
  // As weft-run's --cpu-transport gloo: no shared-memory segment, every collective over Gloo.
  if (o.transport == "gloo") dopts.shm_budget_bytes = 0;
  dopts.job = {{"launch", LaunchId()}, {"job", "calibrate collectives"}, {"transport", o.transport},
               {"quick", o.quick ? "yes" : "no"}};
  std::unique_ptr<dist::DistContext> ctx = dist::DistContext::Create(world, shape, dopts);
  constexpr dist::Axis kAxis = dist::Axis::kUlysses;
  const int n = ctx->AxisSize(kAxis);
  const int r = ctx->AxisRank(kAxis);
  ctx->Barrier(kAxis);
  const int64_t rss_before = CurrentRssBytes();

  // Every tensor the measurements allocate stays alive until the second reading, and is
  // subtracted from it: what is left is what the transport added.
  std::vector<at::Tensor> kept;
  int64_t kept_bytes = 0;
  auto keep = [&](const at::Tensor& t) {
    kept.push_back(t);
    kept_bytes += t.nbytes();
  };
  const double trial_s = o.quick ? 0.01 : 0.03;
  const int trials = o.quick ? 3 : 5;
  Json points = Json::array();
  const at::TensorOptions on = at::TensorOptions().dtype(at::kFloat).device(device);
  for (const char* op : kCollectiveOps) {
    for (int64_t size : CollectiveSizes(o.quick, device.is_cuda())) {
      const int64_t numel = std::max<int64_t>(n, size / 4 / n * n);
      const at::Tensor input = at::zeros({numel}, on);
      at::Tensor buffer = at::empty({numel}, on);
      keep(input);
      keep(buffer);
      at::Tensor last;
      const std::string name = op;
      std::function<void()> call;
      if (name == "all_to_all") {
        call = [&] { last = ctx->AllToAll(kAxis, input, 0, 0); };
      } else if (name == "all_gather") {
        call = [&] { last = ctx->AllGather(kAxis, input, 0); };
      } else if (name == "all_reduce") {
        buffer.zero_();  // zeros: repeated sums stay finite
        call = [&] { ctx->AllReduce(kAxis, buffer); };
      } else {
        call = [&] {
          dist::P2PHandle h = ctx->SendRecv(kAxis, {{input, (r + 1) % n}}, {{buffer, (r - 1 + n) % n}});
          h.Wait();
        };
      }
      const dist::CommOp comm = name == "all_to_all"   ? dist::CommOp::kAllToAll
                                : name == "all_gather" ? dist::CommOp::kAllGather
                                : name == "all_reduce" ? dist::CommOp::kAllReduce
                                                       : dist::CommOp::kSendRecv;
      const dist::CommStat before = ctx->counters().Get(kAxis, comm);
      call();
      call();
      SynchronizeDevice(device);
      // Rank 0 sizes the trials by one call; every rank runs as many.
      ctx->Barrier(kAxis);
      Clock::time_point t0 = Clock::now();
      call();
      SynchronizeDevice(device);
      const double one = Seconds(t0, Clock::now());
      const int64_t want = static_cast<int64_t>(std::clamp(trial_s / std::max(one, 1e-9), 1.0, 2000.0));
      const int64_t reps = ctx->AllGatherSizes(kAxis, want)[0];
      std::vector<double> per_call;
      for (int trial = 0; trial < trials; ++trial) {
        ctx->Barrier(kAxis);
        t0 = Clock::now();
        for (int64_t i = 0; i < reps; ++i) call();
        SynchronizeDevice(device);
        per_call.push_back(Seconds(t0, Clock::now()) / static_cast<double>(reps));
      }
      const dist::CommStat after = ctx->counters().Get(kAxis, comm);
      const double bytes = static_cast<double>(after.bytes_sent - before.bytes_sent) /
                           static_cast<double>(std::max<int64_t>(1, after.calls - before.calls));
      if (last.defined()) keep(last);
      points.push_back({{"op", name}, {"bytes", bytes}, {"seconds", Median(per_call)}});
    }
  }
  ctx->Barrier(kAxis);
  const int64_t rss_after = CurrentRssBytes();
  if (world.rank == 0) {
    const Json doc = {{"transport", o.transport},
                      {"ranks", n},
                      {"rank_base_bytes", rss_before},
                      {"group_bytes", std::max<int64_t>(0, rss_after - rss_before - kept_bytes)},
                      {"points", points}};
    source::WriteFileOrThrow(o.result_file, doc.dump(1) + "\n");
  }
  kept.clear();
  ctx->Shutdown();
  return 0;
}

}  // namespace weft::exec
