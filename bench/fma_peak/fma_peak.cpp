// fma_peak: the fp32 multiply-add rate one core of this machine sustains with nothing but
// independent 8-wide FMAs in registers (12 chains, more than the FMA latency x issue width of
// any x86 core) -- the ceiling a GEMM can approach. bench/flux_e2e.py --floor times the forward's
// GEMMs with the machine's BLAS; this says how far that BLAS is from the core's own limit.
//
//   build/bench/fma_peak/fma_peak [seconds]

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::puts("fma_peak: this CPU has no AVX2 FMA");
    return 1;
  }
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  constexpr long kBatch = 10'000'000;  // 12 FMAs x 8 floats x 2 flops each per iteration
  long iterations = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (long i = 0; i < kBatch; ++i) {
      __asm__ volatile(
          "vfmadd231ps %%ymm15, %%ymm14, %%ymm0\n vfmadd231ps %%ymm15, %%ymm14, %%ymm1\n"
          "vfmadd231ps %%ymm15, %%ymm14, %%ymm2\n vfmadd231ps %%ymm15, %%ymm14, %%ymm3\n"
          "vfmadd231ps %%ymm15, %%ymm14, %%ymm4\n vfmadd231ps %%ymm15, %%ymm14, %%ymm5\n"
          "vfmadd231ps %%ymm15, %%ymm14, %%ymm6\n vfmadd231ps %%ymm15, %%ymm14, %%ymm7\n"
          "vfmadd231ps %%ymm15, %%ymm14, %%ymm8\n vfmadd231ps %%ymm15, %%ymm14, %%ymm9\n"
          "vfmadd231ps %%ymm15, %%ymm14, %%ymm10\n vfmadd231ps %%ymm15, %%ymm14, %%ymm11\n" ::
              : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                "xmm11");
    }
    iterations += kBatch;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::printf("fp32 FMA peak, one core, AVX2: %.1f GFLOP/s (%ld x 12 vfmadd231ps ymm in %.2f s)\n",
              iterations * 12.0 * 16.0 / elapsed / 1e9, iterations, elapsed);
  return 0;
#else
  (void)argc, (void)argv;
  std::puts("fma_peak: x86-64 only");
  return 0;
#endif
}
