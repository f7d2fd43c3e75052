// gpu_attention_check: weft's local attention kernels that return the log-sum-exp
// (runtime/attention/local.h), on the GPU, against the fp64 math reference on the CPU; then their
// speed at Flux-dev's and Wan-14B's attention shapes. Part of the GPU kit (bench/gpu/run.sh).
//
//   gpu_attention_check [--device cuda|cpu] [--iters 20] [--warmup 3] [--quick]
//
// Correctness, per dtype (bf16, fp32) and kernel (fused: flash without a mask on bf16, the
// memory-efficient kernel otherwise; math): out and LSE of even, uneven (Sq != Skv) and masked
// problems, a fully masked batch row included, against ReferenceAttention in fp64 on the CPU on
// the same (rounded) inputs. Reported: max |out - ref| / max |ref| and max |lse - ref| over
// finite entries; -inf LSE rows must agree exactly. Inputs are fresh random normals per case.
// Speed: median wall time of one call (the device synchronised after each), fused with LSE and
// at::scaled_dot_product_attention without it (what a kernel returning no LSE costs), with
// TFLOP/s at 4*B*Sq*Skv*H*D.
// Output: a `json: {...}` and a `detail: ...` line per case, a `summary: ...` line per kernel and
// dtype and per speed case; exit 1 if any check fails.
// --device cpu (--quick: small shapes) runs the same program on the CPU kernels for the dry run.

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#ifdef WEFT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "runtime/attention/local.h"

namespace {

using weft::runtime::AttentionOutput;
using weft::runtime::LocalAttention;
using weft::runtime::LocalAttentionOptions;
using weft::runtime::LocalKernel;
using weft::runtime::LocalKernelName;
using weft::runtime::ReferenceAttention;

struct Args {
  std::string device = "cuda";
  int iters = 20, warmup = 3;
  bool quick = false;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  const char* usage = "usage: gpu_attention_check [--device cuda|cpu] [--iters N] [--warmup N] [--quick]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "gpu_attention_check: " << k << " needs a value\n" << usage;
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--device") {
      a.device = value();
    } else if (k == "--iters") {
      a.iters = std::max(1, std::atoi(value().c_str()));
    } else if (k == "--warmup") {
      a.warmup = std::max(0, std::atoi(value().c_str()));
    } else if (k == "--quick") {
      a.quick = true;
    } else if (k == "-h" || k == "--help") {
      std::cout << usage;
      std::exit(0);
    } else {
      std::cerr << "gpu_attention_check: unknown argument '" << k << "'\n" << usage;
      std::exit(2);
    }
  }
  if (a.device != "cuda" && a.device != "cpu") {
    std::cerr << "gpu_attention_check: --device must be cuda or cpu, not '" << a.device << "'\n";
    std::exit(2);
  }
  return a;
}

void Synchronize(const c10::Device& device) {
#ifdef WEFT_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

const char* DtypeName(at::ScalarType t) { return t == at::kBFloat16 ? "bf16" : "fp32"; }

struct Problem {
  const char* name;
  int64_t b, sq, skv, h, d;
  bool masked;
};

struct CaseResult {
  bool ok = false;
  double out_rel = 0, lse_abs = 0;
};

// One correctness case.
CaseResult CheckCase(const Problem& p, at::ScalarType dtype, LocalKernel kernel, const c10::Device& device) {
  const auto cpu = at::TensorOptions().dtype(at::kFloat);
  // Rounded to the run's dtype first, so the reference sees exactly the kernel's inputs.
  at::Tensor q = at::randn({p.b, p.sq, p.h, p.d}, cpu).to(dtype);
  at::Tensor k = at::randn({p.b, p.skv, p.h, p.d}, cpu).to(dtype);
  at::Tensor v = at::randn({p.b, p.skv, p.h, p.d}, cpu).to(dtype);
  std::optional<at::Tensor> mask;
  if (p.masked) {
    // Batch row 0 attends to a random ~70% of the keys, the last row to none.
    at::Tensor m = at::rand({p.b, p.skv}, cpu) < 0.7;
    m.select(0, p.b - 1).fill_(false);
    mask = m;
  }
  const AttentionOutput ref = ReferenceAttention(q, k, v, mask);

  LocalAttentionOptions options;
  options.kernel = kernel;
  std::optional<at::Tensor> device_mask;
  if (mask) device_mask = mask->to(device);
  AttentionOutput got = LocalAttention(q.to(device), k.to(device), v.to(device), device_mask, options);
  Synchronize(device);
  const at::Tensor out = got.out.to(at::kCPU, at::kDouble);
  const at::Tensor lse = got.lse.to(at::kCPU, at::kDouble);
  const at::Tensor ref_out = ref.out.to(at::kDouble);
  const at::Tensor ref_lse = ref.lse.to(at::kDouble);

  const double scale = std::max(ref_out.abs().max().item<double>(), 1e-30);
  const double out_rel = (out - ref_out).abs().max().item<double>() / scale;
  const at::Tensor finite = at::isfinite(ref_lse);
  const bool inf_rows_agree = at::equal(at::isneginf(lse), at::isneginf(ref_lse));
  const double lse_abs =
      finite.any().item<bool>() ? (lse - ref_lse).masked_select(finite).abs().max().item<double>() : 0.0;
  const bool has_nan = at::isnan(out).any().item<bool>() || at::isnan(lse).any().item<bool>();
  // bf16 inputs, fp32 accumulation: near 1e-2 of max|out| (METHOD.md's bf16 band); fp32 kernels
  // may use TF32 on the GPU (near 3e-4), so 2e-3 leaves room without hiding a wrong result.
  const double out_tol = dtype == at::kBFloat16 ? 2e-2 : 2e-3;
  const double lse_tol = dtype == at::kBFloat16 ? 2e-2 : 2e-3;
  const bool ok = !has_nan && inf_rows_agree && out_rel <= out_tol && lse_abs <= lse_tol;

  std::ostringstream shape;
  shape << "B" << p.b << " Sq" << p.sq << " Skv" << p.skv << " H" << p.h << " D" << p.d << (p.masked ? " masked" : "");
  std::printf("json: {\"kind\": \"attention-check\", \"case\": \"%s\", \"shape\": \"%s\", \"dtype\": \"%s\", "
              "\"kernel\": \"%s\", \"device\": \"%s\", \"out_rel_err\": %.3e, \"lse_abs_err\": %.3e, "
              "\"inf_rows_agree\": %s, \"nan\": %s, \"out_tol\": %.1e, \"lse_tol\": %.1e, \"passed\": %s}\n",
              p.name, shape.str().c_str(), DtypeName(dtype), LocalKernelName(kernel), device.str().c_str(), out_rel,
              lse_abs, inf_rows_agree ? "true" : "false", has_nan ? "true" : "false", out_tol, lse_tol,
              ok ? "true" : "false");
  std::printf("detail: attention %s %s %s (%s) on %s vs fp64 CPU reference: out %.2e of max|ref|, lse %.2e%s -> %s\n",
              LocalKernelName(kernel), DtypeName(dtype), p.name, shape.str().c_str(), device.str().c_str(), out_rel,
              lse_abs, inf_rows_agree ? "" : ", -inf rows DIFFER", ok ? "ok" : "FAILED");
  std::fflush(stdout);
  return {ok, out_rel, lse_abs};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double TimeMs(const Args& a, const c10::Device& device, F&& f) {
  for (int i = 0; i < a.warmup; ++i) f();
  Synchronize(device);
  std::vector<double> ms;
  for (int i = 0; i < a.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    Synchronize(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return Median(ms);
}

void TimeCase(const Args& a, const Problem& p, at::ScalarType dtype, const c10::Device& device) {
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  const at::Tensor q = at::randn({p.b, p.sq, p.h, p.d}, opts);
  const at::Tensor k = at::randn({p.b, p.skv, p.h, p.d}, opts);
  const at::Tensor v = at::randn({p.b, p.skv, p.h, p.d}, opts);
  LocalAttentionOptions fused;
  fused.kernel = LocalKernel::kFused;
  LocalAttentionOptions no_lse;
  no_lse.kernel = LocalKernel::kNoLse;
  no_lse.return_lse = false;
  const double with_lse = TimeMs(a, device, [&] { (void)LocalAttention(q, k, v, std::nullopt, fused); });
  const double without = TimeMs(a, device, [&] { (void)LocalAttention(q, k, v, std::nullopt, no_lse); });
  const double flop = 4.0 * static_cast<double>(p.b * p.sq * p.skv * p.h * p.d);
  std::ostringstream shape;
  shape << "B" << p.b << " S" << p.sq << " H" << p.h << " D" << p.d;
  std::printf("json: {\"kind\": \"attention-speed\", \"case\": \"%s\", \"shape\": \"%s\", \"dtype\": \"%s\", "
              "\"device\": \"%s\", \"fused_lse_ms\": %.4f, \"sdpa_no_lse_ms\": %.4f, \"fused_tflops\": %.2f, "
              "\"iters\": %d, \"warmup\": %d}\n",
              p.name, shape.str().c_str(), DtypeName(dtype), device.str().c_str(), with_lse, without,
              flop / (with_lse * 1e-3) / 1e12, a.iters, a.warmup);
  std::printf("summary: attention speed %s %s (%s) on %s: fused+LSE %.3f ms (%.3g TFLOP/s), sdpa without LSE %.3f ms, "
              "ratio %.2f (median of %d)\n",
              p.name, DtypeName(dtype), shape.str().c_str(), device.str().c_str(), with_lse,
              flop / (with_lse * 1e-3) / 1e12, without, with_lse / without, a.iters);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = ParseArgs(argc, argv);
  c10::Device device(c10::kCPU);
  if (a.device == "cuda") {
#ifdef WEFT_WITH_CUDA
    if (c10::cuda::device_count() == 0) {
      std::cerr << "gpu_attention_check: --device cuda but no CUDA device is visible\n";
      return 1;
    }
    device = c10::Device(c10::kCUDA, 0);
#else
    std::cerr << "gpu_attention_check: --device cuda needs a build with -DWEFT_ENABLE_CUDA=ON\n";
    return 1;
#endif
  }
  at::manual_seed(20260);
  const bool small = a.quick;
  const std::vector<Problem> checks = {
      {"even", 1, small ? 128 : 1024, small ? 128 : 1024, small ? 2 : 8, 128, false},
      {"uneven", 2, small ? 77 : 777, small ? 131 : 1031, small ? 2 : 4, 64, false},
      {"masked", 2, small ? 96 : 640, small ? 160 : 1536, small ? 2 : 6, 128, true},
  };
  // One summary line per kernel and dtype: the worst case of the three problems, and which failed.
  bool all_ok = true;
  for (at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    for (LocalKernel kernel : {LocalKernel::kFused, LocalKernel::kMath}) {
      double worst_out = 0, worst_lse = 0;
      int passed = 0;
      std::string failed;
      for (const Problem& p : checks) {
        try {
          const CaseResult r = CheckCase(p, dtype, kernel, device);
          worst_out = std::max(worst_out, r.out_rel);
          worst_lse = std::max(worst_lse, r.lse_abs);
          if (r.ok) {
            ++passed;
          } else {
            failed += std::string(" ") + p.name;
          }
        } catch (const std::exception& e) {
          failed += std::string(" ") + p.name + " (" + std::string(e.what()).substr(0, 200) + ")";
        }
      }
      all_ok = all_ok && failed.empty();
      std::printf("summary: attention %s %s on %s vs fp64 CPU reference: %d/%zu cases ok (even, uneven Sq!=Skv, "
                  "key-masked with an empty row); worst out %.2e of max|ref|, worst lse %.2e%s%s\n",
                  LocalKernelName(kernel), DtypeName(dtype), device.str().c_str(), passed, checks.size(), worst_out,
                  worst_lse, failed.empty() ? "" : "; FAILED:", failed.c_str());
      std::fflush(stdout);
    }
  }
  // Flux-dev 1024x1024: 4096 image + 512 text tokens, 24 heads x 128. Wan2.1-14B 832x480x81:
  // 21 x 30 x 52 = 32760 tokens, 40 heads x 128 (bf16 only: fp32 there is no real workload).
  const std::vector<std::pair<Problem, std::vector<at::ScalarType>>> speeds = {
      {{"flux-dev-1024", 1, small ? 256 : 4608, small ? 256 : 4608, small ? 2 : 24, 128, false},
       {at::kBFloat16, at::kFloat}},
      {{"wan-14b-480p", 1, small ? 512 : 32760, small ? 512 : 32760, small ? 2 : 40, 128, false}, {at::kBFloat16}},
  };
  for (const auto& [p, dtypes] : speeds) {
    for (at::ScalarType dtype : dtypes) {
      try {
        TimeCase(a, p, dtype, device);
      } catch (const std::exception& e) {
        all_ok = false;
        std::printf("summary: attention speed %s %s on %s -> FAILED: %s\n", p.name, DtypeName(dtype),
                    device.str().c_str(), std::string(e.what()).substr(0, 300).c_str());
      }
    }
  }
  return all_ok ? 0 : 1;
}
