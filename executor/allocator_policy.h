#pragma once

namespace weft::exec {

// Makes glibc keep freed memory for reuse instead of handing it back to the kernel.
//
// A forward allocates and frees the same activation sizes every iteration. With glibc's
// defaults, every block over its (dynamic) mmap threshold is a fresh mmap, and every page of it
// faults and is zeroed on first touch: a 2-rank small-Flux forward took ~4,300 minor faults
// per rank (17 MB of pages) -- time in the kernel, every iteration, on both sides of each
// all-to-all. Serving blocks up to glibc's largest mmap threshold (32 MiB) from the heap and
// not trimming the heap below 1 GiB of free space brings that to ~220 per rank-forward
// (measured with /usr/bin/time over 10 forwards). The process keeps its peak footprint, which
// is what a rank needs anyway. Call once, first thing in a rank; returns false when glibc
// refused a setting (non-glibc libc: a no-op).
bool ReuseFreedMemory();

}  // namespace weft::exec
