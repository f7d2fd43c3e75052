// The shared-memory transport on its own: ranks are threads of this process sharing an
// in-process store (the segment is mapped once per rank, as across processes). Multi-process
// use, peer death and timeouts through DistContext are in collectives_test.cpp.
#include "runtime/dist/shm_transport.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace weft::dist {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kBudget = int64_t{32} << 20;

// Runs body(rank, transport) on `size` threads after creating one transport per rank with
// budgets[rank]; returns each rank's `why_not` ("" when it got a transport).
std::vector<std::string> OnRanks(int size, const std::vector<int64_t>& budgets,
                                 const std::function<void(int, ShmTransport&)>& body,
                                 milliseconds timeout = milliseconds(5000)) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> why(size);
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto t = ShmTransport::Create(*store, r, size, budgets[r], timeout, std::chrono::microseconds(20),
                                      std::vector<int>(size, getpid()), &why[r]);
        if (t) body(r, *t);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return why;
}

TEST(ShmPieceBytes, SplitsTheBudgetOverTheSlots) {
  EXPECT_EQ(ShmPieceBytes(2, kBudget), 1 << 20);          // capped at 1 MiB
  EXPECT_EQ(ShmPieceBytes(8, kBudget), 299008);           // 32 MiB / 112 slots, rounded down to 4 KiB
  EXPECT_EQ(ShmPieceBytes(64, kBudget), 64 << 10);        // floor
  EXPECT_EQ(ShmPieceBytes(1, kBudget), 0);
}

// Every pair exchanges a message of a different size; some are larger than a piece (streamed),
// some strided on the sending or the receiving side, some empty.
TEST(ShmTransport, AllToAllOfMixedSizesAndLayouts) {
  const int n = 3;
  const int64_t budget = 12 * (128 << 10);  // 12 slots of 128 KiB: a 960 KB message takes 8 pieces
  auto rows = [](int from, int to) { return int64_t{(from * 7 + to * 3) % 5} * 12000; };  // 0..48000 rows
  auto message = [&](int from, int to) {
    return at::arange(rows(from, to) * 5, at::kFloat).view({rows(from, to), 5}) + 1e6 * from + 1e5 * to;
  };
  std::vector<std::string> why = OnRanks(n, {budget, budget, budget}, [&](int me, ShmTransport& t) {
    EXPECT_EQ(t.piece_bytes(), 128 << 10);
    std::vector<at::Tensor> send, recv, want;
    for (int j = 0; j < n; ++j) {
      // Strided source for odd peers: the transposed copy, transposed back.
      at::Tensor m = message(me, j);
      send.push_back(j % 2 ? m.t().contiguous().t() : m);
      // Strided destination for even peers: a column slice of a wider buffer.
      at::Tensor wide = at::zeros({rows(j, me), 8});
      recv.push_back(j % 2 ? at::empty({rows(j, me), 5}) : wide.narrow(1, 2, 5));
      want.push_back(message(j, me));
    }
    for (int round = 0; round < 3; ++round) {  // the channels' counters carry over between calls
      for (auto& r : recv) r.zero_();
      t.Exchange(send, recv);
      for (int j = 0; j < n; ++j) EXPECT_TRUE(at::equal(recv[j], want[j])) << "rank " << me << " from " << j;
    }
  });
  for (const std::string& w : why) EXPECT_EQ(w, "");
}

// Zero-byte messages synchronise: no rank leaves before every rank has arrived.
TEST(ShmTransport, EmptyExchangeIsABarrier) {
  std::atomic<int> arrived{0};
  OnRanks(4, std::vector<int64_t>(4, kBudget), [&](int me, ShmTransport& t) {
    std::this_thread::sleep_for(milliseconds(20 * me));
    ++arrived;
    t.Exchange(std::vector<at::Tensor>(4), std::vector<at::Tensor>(4));
    EXPECT_EQ(arrived.load(), 4);
  });
}

TEST(ShmTransport, DisagreeingSizesNameThePeerAndBothSizes) {
  std::vector<std::string> errors(2);
  OnRanks(2, {kBudget, kBudget}, [&](int me, ShmTransport& t) {
    // Rank 1 sends 4 floats to rank 0, which expects 3.
    std::vector<at::Tensor> send{at::ones({me == 1 ? 4 : 3}), at::ones({3})};
    std::vector<at::Tensor> recv{at::empty({3}), at::empty({3})};
    try {
      t.Exchange(send, recv);
    } catch (const ShmError& e) {
      errors[me] = e.what();
    }
  }, milliseconds(1000));
  EXPECT_EQ(errors[0], "group rank 1 sent 16 bytes but this rank expects 12 (the ranks' shapes or splits disagree)");
}

TEST(ShmTransport, TimesOutNamingTheMissingRank) {
  std::string error;
  OnRanks(3, std::vector<int64_t>(3, kBudget), [&](int me, ShmTransport& t) {
    if (me != 0) return;  // ranks 1 and 2 never take part
    auto start = std::chrono::steady_clock::now();
    try {
      t.Exchange({at::ones({2}), at::ones({2}), at::ones({2})}, {at::empty({2}), at::empty({2}), at::empty({2})});
    } catch (const ShmError& e) {
      error = e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
  }, milliseconds(300));
  EXPECT_EQ(error, "timed out waiting for group rank(s) 1, 2");
}

TEST(ShmTransport, ARankWithoutABudgetTurnsItOffForTheWholeGroup) {
  std::vector<std::string> why = OnRanks(3, {kBudget, 0, kBudget}, [](int, ShmTransport&) {
    ADD_FAILURE() << "no rank should get a transport";
  });
  EXPECT_EQ(why[0], "shared memory is turned off on group rank 1");
  EXPECT_EQ(why[1], "shared memory is turned off");
  EXPECT_EQ(why[2], "shared memory is turned off on group rank 1");
}

// A name left behind by a dead creator is removed once it is a minute old; a fresh one, or one
// whose creator lives, stays.
TEST(ShmTransport, StaleSegmentNamesOfDeadCreatorsAreRemoved) {
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  auto make = [](const std::string& name, bool old) {
    const std::string path = "/dev/shm/" + name;
    std::ofstream(path) << "x";
    if (old) {
      utimbuf times{std::time(nullptr) - 120, std::time(nullptr) - 120};
      utime(path.c_str(), &times);
    }
    return path;
  };
  auto exists = [](const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
  };
  const std::string stale = make("weft-" + std::to_string(dead) + "-stale-test", true);
  const std::string fresh = make("weft-" + std::to_string(dead) + "-fresh-test", false);
  const std::string alive = make("weft-" + std::to_string(getpid()) + "-alive-test", true);
  RemoveStaleShmSegments();
  EXPECT_FALSE(exists(stale));
  EXPECT_TRUE(exists(fresh));
  EXPECT_TRUE(exists(alive));
  unlink(fresh.c_str());
  unlink(alive.c_str());
}

}  // namespace
}  // namespace weft::dist
