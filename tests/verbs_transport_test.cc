// The transport contract on the RDMA verbs transport, with threads as ranks over one device
// (Soft-RoCE loopback connects QPs of one process): pairwise traffic with values unique per
// (rank, index), tag and length mismatches, memory registered in small chunks, the ring
// allreduce exact for 2..4 ranks, abort and timeouts that name the peer.
// Without an RDMA device only the "fails at once" test runs; the others run in the qemu
// guests of tests/rdma/ (Soft-RoCE, rdma_rxe).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "collectives/allreduce.h"
#include "base/errors.h"
#include "collectives/store.h"
#include "collectives/transport/verbs/verbs_transport.h"
#include "collectives/verify.h"
#include "tests/rank_threads.h"
#include "tests/transport_contract.h"

namespace ringbench {
namespace {

using namespace std::chrono_literals;

#define SKIP_WITHOUT_DEVICE()                                                               \
  if (verbs_device_names().empty())                                                         \
  GTEST_SKIP() << "no RDMA device (ibv_get_device_list found none); run tests/rdma/ guests"

// Generous: Soft-RoCE in an emulated guest on a loaded host can hold packets for seconds, and
// these tests are about the contract, not about detecting dead peers.
VerbsOptions opts(std::chrono::milliseconds timeout = 20000ms) {
  VerbsOptions o;
  o.timeout = timeout;
  return o;
}

// Runs `n` ranks as threads, each with its own verbs transport; rethrows the first failure.
void run_ranks(int n, const std::function<void(Transport&, Store&)>& body,
               VerbsOptions o = opts()) {
  InProcStore store;
  ringbench::testing::run_threads(n, [&](int r) {
    auto t = make_verbs_transport(store, r, n, o);
    body(*t, store);
  });
}

// run_ranks with a registered buffer of `bytes` bytes of `fill` on every rank; the ranks meet at a
// barrier at the end, so that none closes its transport while a peer still expects it.
void run_with_buffer(int n, size_t bytes, char fill,
                     const std::function<void(Transport&, Store&, Buffer&)>& body) {
  run_ranks(n, [&](Transport& t, Store& store) {
    std::vector<char> buf(bytes, fill);
    auto b = t.register_buffer(buf.data(), buf.size());
    body(t, store, *b);
    store_barrier(store, "done", n, 10s);
  });
}

uint32_t value(int rank, size_t index) { return static_cast<uint32_t>(rank) << 24 ^ static_cast<uint32_t>(index * 2654435761u); }

TEST(VerbsTransport, NoDeviceFailsAtOnce) {
  if (!verbs_device_names().empty()) GTEST_SKIP() << "this host has an RDMA device";
  InProcStore store;  // nobody else joins: failing must not wait for peers
  auto start = std::chrono::steady_clock::now();
  try {
    make_verbs_transport(store, 0, 2, opts());
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no RDMA device found (ibv_get_device_list returned none)"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--transport tcp"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(VerbsTransport, UnknownDeviceListsTheOnesThatExist) {
  SKIP_WITHOUT_DEVICE();
  InProcStore store;
  VerbsOptions o = opts();
  o.device = "no_such_dev0";
  try {
    make_verbs_transport(store, 0, 2, o);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(verbs_device_names().front()), std::string::npos) << e.what();
  }
}

TEST(VerbsTransport, DeclaresItsPath) {
  SKIP_WITHOUT_DEVICE();
  run_ranks(2, [](Transport& t, Store&) {
    EXPECT_EQ(t.caps().name, "verbs");
    EXPECT_TRUE(t.caps().host_memory);
    auto p = t.path_info();
    EXPECT_EQ(p["transport"], "verbs");
    for (const char* k : {"device", "provider", "link_layer", "gid_index", "gid_type", "gid",
                          "active_mtu", "link_gbps", "mr_chunk_bytes"})
      EXPECT_FALSE(p[k].empty()) << k;
    if (p["link_layer"] == "Ethernet") {
      EXPECT_NE(p["gid_type"].find("RoCE"), std::string::npos);
    }
    int x = 0;
    EXPECT_THROW(t.register_buffer(&x, sizeof x, MemKind::cuda), Error);
  });
}

// Every rank sends to every other rank many messages of varied sizes (zero included), posted
// before the matching receives on half of the peers; each arrives in posting order.
TEST(VerbsTransport, PairwiseOrderedUniqueValues) {
  SKIP_WITHOUT_DEVICE();
  run_ranks(3, [](Transport& t, Store&) {
    const int n = t.size(), me = t.rank();
    const int msgs = 300;  // more than the QP depth: some wait in software
    const size_t per_peer = 40000;
    std::vector<uint32_t> src(per_peer), dst(per_peer * static_cast<size_t>(n), 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = value(me, i);
    auto sb = t.register_buffer(src.data(), src.size() * 4);
    auto db = t.register_buffer(dst.data(), dst.size() * 4);
    auto len = [](int i) { return static_cast<size_t>(i * 37 % 11) * 12; };
    std::vector<std::unique_ptr<Request>> reqs;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      size_t off = 0;
      for (int i = 0; i < msgs; ++i) {
        reqs.push_back(t.isend(peer, *sb, off * 4, len(i) * 4, static_cast<uint64_t>(i)));
        off += len(i);
      }
    }
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      size_t off = 0;
      for (int i = 0; i < msgs; ++i) {
        reqs.push_back(t.irecv(peer, *db, (static_cast<size_t>(peer) * per_peer + off) * 4,
                               len(i) * 4, static_cast<uint64_t>(i)));
        off += len(i);
      }
    }
    for (auto& r : reqs) r->wait(10s);
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      size_t total = 0;
      for (int i = 0; i < msgs; ++i) total += len(i);
      for (size_t i = 0; i < total; ++i)
        ASSERT_EQ(dst[static_cast<size_t>(peer) * per_peer + i], value(peer, i))
            << "rank " << me << " from " << peer << " index " << i;
    }
  });
}

// Rank 0 sends `sent` bytes tagged 7, rank 1 posts a receive of `posted` bytes tagged `tag`: the
// receive fails with an IoError from rank 0 that says `says`. The send must succeed unless
// `send_may_fail`.
void expect_receive_fails(size_t sent, size_t posted, uint64_t tag, bool send_may_fail, const std::string& says) {
  run_with_buffer(2, 1024, 1, [&](Transport& t, Store&, Buffer& b) {
    if (t.rank() == 0) {
      try {
        t.isend(1, b, 0, sent, 7)->wait(5s);
      } catch (const IoError&) {
        if (!send_may_fail) throw;
      }
    } else {
      const auto f = testing::failed_wait<IoError>(*t.irecv(0, b, 0, posted, tag), 5s);
      EXPECT_EQ(f.peer, 0);
      EXPECT_NE(f.what.find(says), std::string::npos) << f.what;
    }
  });
}

TEST(VerbsTransport, TagMismatchIsAnIoErrorOnTheReceiver) {
  SKIP_WITHOUT_DEVICE();
  expect_receive_fails(64, 64, /*tag=*/8, /*send_may_fail=*/false, "disagree");
}

TEST(VerbsTransport, LengthMismatchIsAnIoErrorOnTheReceiver) {
  SKIP_WITHOUT_DEVICE();
  for (size_t sent : {size_t{100}, size_t{300}}) {  // shorter and longer than the receive
    SCOPED_TRACE(std::to_string(sent) + " bytes sent");
    // A longer message is refused by the receiver's HCA, which may fail the send.
    expect_receive_fails(sent, 200, /*tag=*/7, /*send_may_fail=*/true, "rank 0 (gid");
  }
}

// MRs of 4 KiB over a 1 MiB buffer: transfers that cross chunk boundaries use one SGE per
// chunk; one spanning more chunks than the device has SGEs is refused with a clear message.
TEST(VerbsTransport, ChunkedMemoryRegions) {
  SKIP_WITHOUT_DEVICE();
  VerbsOptions o = opts();
  o.mr_chunk_bytes = 4096;
  run_ranks(2, [](Transport& t, Store&) {
    EXPECT_EQ(t.path_info()["mr_chunk_bytes"], "4096");
    const size_t bytes = 1 << 20;
    std::vector<uint32_t> src(bytes / 4), dst(bytes / 4, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = value(t.rank(), i);
    auto sb = t.register_buffer(src.data(), bytes);
    auto db = t.register_buffer(dst.data(), bytes);
    const int peer = 1 - t.rank();
    struct Range {
      size_t off, len;
    };
    const std::vector<Range> ranges = {{4000, 200}, {3 * 4096 - 4, 2 * 4096 + 8}, {40960, 8 * 4096},
                                       {bytes - 4096 - 100, 4096 + 100}, {5000, 0}};
    std::vector<std::unique_ptr<Request>> reqs;
    for (auto r : ranges) reqs.push_back(t.irecv(peer, *db, r.off, r.len, r.off));
    for (auto r : ranges) reqs.push_back(t.isend(peer, *sb, r.off, r.len, r.off));
    for (auto& r : reqs) r->wait(10s);
    for (auto r : ranges)
      for (size_t i = r.off / 4; i < (r.off + r.len) / 4; ++i)
        ASSERT_EQ(dst[i], value(peer, i)) << "index " << i;
    try {
      t.isend(peer, *sb, 0, bytes, 1);
      ADD_FAILURE() << "a 256-chunk transfer should exceed the device's SGE limit";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--mr-chunk"), std::string::npos) << e.what();
    }
  }, o);
}

TEST(VerbsTransport, RingAllreduceIsExact) {
  SKIP_WITHOUT_DEVICE();
  for (int n : {2, 3, 4}) {
    run_ranks(n, [&](Transport& t, Store&) {
      for (size_t count : {size_t{0}, size_t{7}, size_t{1000}, (size_t{1} << 18) + 3})
        for (AllreduceAlgo algo : {AllreduceAlgo::ring, AllreduceAlgo::direct, AllreduceAlgo::automatic}) {
          SCOPED_TRACE("ranks " + std::to_string(n) + " count " + std::to_string(count) + " " +
                       algo_name(algo));
          std::vector<char> in(count * 4 + 1), out(count * 4 + 1, 0x5a);
          fill_input(DType::f32, in.data(), count, t.rank(), n);
          AllreduceOptions ao;
          ao.algo = algo;
          ao.ring.segment_bytes = 64 << 10;
          ao.ring.timeout = 30s;
          Allreduce ar(t, in.data(), out.data(), count, DType::f32, ReduceOp::sum, ao);
          ar.run(count);
          EXPECT_EQ(count_wrong(DType::f32, out.data(), count, n, ReduceOp::sum), 0u);
          EXPECT_EQ(out[count * 4], 0x5a) << "wrote past the end";
        }
    });
  }
}

// The ring over 4 KiB memory regions: every segment crosses chunk boundaries.
TEST(VerbsTransport, RingAllreduceOverChunkedRegions) {
  SKIP_WITHOUT_DEVICE();
  VerbsOptions o = opts();
  o.mr_chunk_bytes = 4096;
  run_ranks(3, [&](Transport& t, Store&) {
    const size_t count = 100003;
    std::vector<char> in(count * 4);
    fill_input(DType::f32, in.data(), count, t.rank(), 3);
    AllreduceOptions ao;
    ao.algo = AllreduceAlgo::ring;
    ao.ring.segment_bytes = 16 << 10;
    ao.ring.timeout = 30s;
    Allreduce ar(t, in.data(), in.data(), count, DType::f32, ReduceOp::sum, ao);
    ar.run(count);
    EXPECT_EQ(count_wrong(DType::f32, in.data(), count, 3, ReduceOp::sum), 0u);
  }, o);
}

TEST(VerbsTransport, AbortFailsPeersWithTheReason) {
  SKIP_WITHOUT_DEVICE();
  run_with_buffer(3, 64, 0, [](Transport& t, Store& store, Buffer& b) {
    if (t.rank() == 0) {
      store_barrier(store, "posted", 3, 10s);
      t.abort("the test says stop");
      EXPECT_THROW(t.isend(1, b, 0, 8, 1), IoError);
    } else {
      auto r = t.irecv(0, b, 0, 8, 1);
      store_barrier(store, "posted", 3, 10s);
      const auto f = testing::failed_wait<IoError>(*r, 10s);
      EXPECT_EQ(f.peer, 0);
      EXPECT_NE(f.what.find("aborted: the test says stop"), std::string::npos) << f.what;
      EXPECT_LT(f.took, 3s);
    }
  });
}

TEST(VerbsTransport, TimeoutNamesThePeer) {
  SKIP_WITHOUT_DEVICE();
  run_with_buffer(2, 64, 0, [](Transport& t, Store&, Buffer& b) {
    if (t.rank() == 1) {
      auto r = t.irecv(0, b, 0, 8, 1);  // kept until after the abort
      const auto f = testing::failed_wait<TimeoutError>(*r, 300ms);
      EXPECT_EQ(f.peer, 0);
      EXPECT_NE(f.what.find("rank 0 (gid"), std::string::npos) << f.what;
      t.abort("test over");
    }
  });
}

}  // namespace
}  // namespace ringbench
