// Checks of the transport contract (collectives/transport.h) that hold for every transport: each
// transport's test runs them on its own ranks, through `run(n, body)`, which runs body on n
// connected ranks of that transport (threads as ranks). Before them, helpers of the transports'
// own tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/transport.h"

namespace ringbench::testing {

// A transport of host memory only: its caps and its path give `name`, and CUDA memory is refused.
inline void expect_host_memory_only(Transport& t, const std::string& name) {
  EXPECT_EQ(t.caps().name, name);
  EXPECT_TRUE(t.caps().host_memory);
  EXPECT_FALSE(t.caps().cuda_memory);
  EXPECT_EQ(t.path_info()["transport"], name);
  int x = 0;
  EXPECT_THROW(t.register_buffer(&x, sizeof x, MemKind::cuda), Error);
}

// How a wait that must fail with an `E` (IoError, TimeoutError) failed: the peer its error names,
// its message, and how long the wait took; peer -2 and "the wait returned" when it did not fail.
struct WaitFailure {
  int peer;
  std::string what;
  std::chrono::steady_clock::duration took;
};

template <class E>
WaitFailure failed_wait(Request& r, std::chrono::milliseconds timeout) {
  const auto t0 = std::chrono::steady_clock::now();
  WaitFailure f{-2, "the wait returned", {}};
  try {
    r.wait(timeout);
  } catch (const E& e) {
    f.peer = e.peer();
    f.what = e.what();
  }
  f.took = std::chrono::steady_clock::now() - t0;
  return f;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A rank's registered send and receive buffers of uint32 for ordering checks: what it sends
// counts up from rank << 24, so every element received says whose it is and where it was.
struct Numbered {
  Numbered(Transport& t, size_t n) : src(n), dst(n, 0) {
    std::iota(src.begin(), src.end(), static_cast<uint32_t>(t.rank()) << 24);
    sb = t.register_buffer(src.data(), n * 4);
    db = t.register_buffer(dst.data(), n * 4);
  }

  // The first `n` elements received are `peer`'s first `n`, in order.
  ::testing::AssertionResult received_from(int peer, size_t n) const {
    for (size_t i = 0; i < n; ++i)
      if (dst[i] != (static_cast<uint32_t>(peer) << 24) + i)
        return ::testing::AssertionFailure() << "element " << i << " is " << dst[i];
    return ::testing::AssertionSuccess();
  }

  std::vector<uint32_t> src, dst;
  std::unique_ptr<Buffer> sb, db;
};

}  // namespace ringbench::testing

namespace ringbench::testing::contract {

using namespace std::chrono_literals;
using RunRanks = std::function<void(int n, const std::function<void(Transport&)>& body)>;

// A transfer completes by polling test() alone, with the data in place.
inline void test_polls_to_completion(const RunRanks& run) {
  run(2, [](Transport& t) {
    std::vector<char> buf(1 << 20, static_cast<char>(t.rank()));
    auto b = t.register_buffer(buf.data(), buf.size());
    auto r = t.rank() == 0 ? t.isend(1, *b, 0, buf.size(), 7) : t.irecv(0, *b, 0, buf.size(), 7);
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!r->test()) ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    if (t.rank() == 1) {
      EXPECT_EQ(buf.front(), 0);
      EXPECT_EQ(buf.back(), 0);
    }
  });
}

// Transfers outside the registered buffer, to this rank or to no rank, are refused at once.
inline void out_of_bounds_and_bad_peer_are_errors(const RunRanks& run) {
  run(2, [](Transport& t) {
    std::vector<char> buf(100);
    auto b = t.register_buffer(buf.data(), buf.size());
    EXPECT_THROW(t.isend(1 - t.rank(), *b, 50, 51, 0), Error);
    EXPECT_THROW(t.irecv(1 - t.rank(), *b, 101, 0, 0), Error);
    EXPECT_THROW(t.isend(t.rank(), *b, 0, 1, 0), Error);
    EXPECT_THROW(t.isend(2, *b, 0, 1, 0), Error);
    EXPECT_THROW(t.irecv(-1, *b, 0, 1, 0), Error);
  });
}

// A message whose length or tag differs from the posted receive fails the receiver with an
// IoError naming the sender; the receiver's abort then fails the sender too.
inline void mismatch_fails_both_sides(const RunRanks& run) {
  for (bool tag_differs : {false, true}) {
    std::vector<std::string> errors(2);
    std::vector<int> peers(2, -2);
    run(2, [&](Transport& t) {
      std::vector<char> buf(64);
      auto b = t.register_buffer(buf.data(), buf.size());
      try {
        if (t.rank() == 0) {
          t.isend(1, *b, 0, 32, 1)->wait(5s);
          t.irecv(1, *b, 0, 8, 2)->wait(5s);  // never comes: rank 1 aborts
        } else {
          t.irecv(0, *b, 0, tag_differs ? 32 : 16, tag_differs ? 9 : 1)->wait(5s);
        }
      } catch (const IoError& e) {
        errors[t.rank()] = e.what();
        peers[t.rank()] = e.peer();
        if (t.rank() == 1) t.abort(e.what());
      }
    });
    EXPECT_NE(errors[1].find("disagree"), std::string::npos) << errors[1];
    EXPECT_NE(errors[1].find("rank 0"), std::string::npos) << errors[1];
    EXPECT_EQ(peers[1], 0);
    EXPECT_NE(errors[0].find("rank 1"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("aborted"), std::string::npos) << errors[0];
    EXPECT_EQ(peers[0], 1);
  }
}

// A live peer that never sends: the wait times out within `bound` (it does not hang) and names
// that peer.
inline void wait_times_out_naming_alive_peer(const RunRanks& run, std::chrono::milliseconds bound) {
  run(3, [&](Transport& t) {
    std::vector<char> buf(8);
    auto b = t.register_buffer(buf.data(), buf.size());
    if (t.rank() == 2) {
      auto r = t.irecv(1, *b, 0, 8, 0);  // kept until after the abort
      const WaitFailure f = failed_wait<TimeoutError>(*r, 300ms);
      EXPECT_EQ(f.peer, 1);
      EXPECT_TRUE(contains(f.what, "rank 1")) << f.what;
      EXPECT_TRUE(contains(f.what, "alive")) << f.what;
      EXPECT_LT(f.took, bound);
      t.abort("test over");
    } else {
      // Stay alive until rank 2 is done, then observe its abort.
      EXPECT_THROW(t.irecv(2, *b, 0, 8, 0)->wait(10s), IoError);
    }
  });
}

}  // namespace ringbench::testing::contract
