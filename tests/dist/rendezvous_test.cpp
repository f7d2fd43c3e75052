// Rendezvous errors of DistContext::Create, in one process: port in use, unreachable store,
// mesh/world mismatch, NCCL without CUDA; and the single-rank world.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "runtime/dist/dist_context.h"

namespace weft::dist {
namespace {

WorldConfig Single(int port) {
  WorldConfig w;
  w.master_port = port;
  return w;
}

TEST(Rendezvous, PortInUseIsAClearError) {
  // Hold a listening socket on a free port, then ask rank 0 to serve the store there.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  const int port = ntohs(sa.sin_port);
  DistOptions o;
  o.timeout = std::chrono::seconds(3);
  try {
    DistContext::Create(Single(port), MeshShape{}, o);
    ADD_FAILURE() << "no error";
  } catch (const DistError& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("rank 0: cannot start the TCPStore server on 127.0.0.1:" + std::to_string(port) +
                          " (MASTER_ADDR:MASTER_PORT): the port is already in use",
                      0),
              0u)
        << m;
  }
  ::close(fd);
}

TEST(Rendezvous, UnreachableStoreTimesOut) {
  WorldConfig w;
  w.rank = 1;
  w.world_size = 2;
  w.local_rank = 1;
  w.local_world_size = 2;
  w.master_port = FindFreePort();  // nobody listens there
  DistOptions o;
  o.timeout = std::chrono::milliseconds(1500);
  auto start = std::chrono::steady_clock::now();
  try {
    DistContext::Create(w, MeshShape{2, 1, 1}, o);
    ADD_FAILURE() << "no error";
  } catch (const DistError& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("rank 1: cannot reach the TCPStore at 127.0.0.1:" + std::to_string(w.master_port), 0), 0u)
        << m;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(Rendezvous, MeshMustMatchWorld) {
  try {
    DistContext::Create(Single(FindFreePort()), MeshShape{2, 1, 1});
    ADD_FAILURE() << "no error";
  } catch (const DistError& e) {
    EXPECT_STREQ(e.what(), "mesh ring=2,ulysses=1,tp=1 has 2 ranks (ring*ulysses*tp*cfg) but the world has 1");
  }
}

TEST(Rendezvous, SingleRankWorldWorksWithoutPeers) {
  DistOptions o;
  o.timeout = std::chrono::seconds(5);
  auto ctx = DistContext::Create(Single(FindFreePort()), MeshShape{}, o);
  EXPECT_EQ(ctx->AxisSize(Axis::kWorld), 1);
  EXPECT_EQ(ctx->GroupRanks(Axis::kCp), std::vector<int>{0});
  EXPECT_EQ(ctx->AllGatherSizes(Axis::kCp, 42), std::vector<int64_t>{42});
  ctx->Barrier(Axis::kWorld);
  EXPECT_EQ(ctx->counters().Get(Axis::kWorld, CommOp::kBarrier), (CommStat{1, 0}));
}

#ifndef WEFT_WITH_CUDA
TEST(Rendezvous, NcclWithoutCudaBuildIsAnError) {
  DistOptions o;
  o.enable_nccl = true;
  EXPECT_THROW(DistContext::Create(Single(FindFreePort()), MeshShape{}, o), DistError);
}
#endif

}  // namespace
}  // namespace weft::dist
