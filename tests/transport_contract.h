// Checks of the transport contract (collectives/transport.h) that hold for every transport: each
// transport's test runs them on its own ranks, through `run(n, body)`, which runs body on n
// connected ranks of that transport (threads as ranks).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/transport.h"

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

}  // namespace ringbench::testing::contract
