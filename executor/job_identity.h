#pragma once

// What makes two weft-run ranks parts of one job: every rank publishes its job identity at the
// rendezvous (dist::DistOptions::job) and refuses to start when a rank's differs from rank 0's,
// so a rank of another job (two jobs on one MASTER_PORT) or a rank started with other options
// (another seed, plan, checkpoint ...) is named before the first collective instead of silently
// computing a wrong result.

#include <string>
#include <utility>
#include <vector>

namespace weft::exec {

using JobIdentity = std::vector<std::pair<std::string, std::string>>;

// An identity of a file's content that every host computes alike without reading all of a
// multi-gigabyte checkpoint: "<size> bytes, sha256:<hex>" over the whole file when it is at most
// 3 x 64 KiB, else over its first, middle and last 64 KiB (a safetensors header, with every key,
// shape and offset, is at the start). Paths and times are not part of it: each host may keep
// its copy elsewhere. Throws std::runtime_error naming the file when it cannot be read.
std::string FileIdentity(const std::string& path);

// The job's launch identity from the environment: WEFT_JOB_ID (set by weft-run's launcher for
// its ranks), else TORCHELASTIC_RUN_ID (torchrun's --rdzv-id), else "".
std::string LaunchId();

}  // namespace weft::exec
