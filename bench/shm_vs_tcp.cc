// Ring allreduce bus bandwidth over the shm transport and over the TCP transport (loopback), side
// by side: threads as ranks, f32 sum, the ring's default options. shm runs three times: forwarding
// each message into the next rank's ring as it arrives (the default), reducing it out of the
// shared ring without forwarding (ShmOptions::forward = false), and copying each message into a
// slot first (reduce_in_ring = false). For every rank count and size, each repeat runs the four
// in turn (so load changes on the host hit all alike) and the table gives the median, min and max
// busbw of the repeats and the ratios of the medians.
//   busbw = algbw * 2(N-1)/N, algbw = bytes / time of one allreduce.
// Usage: shm_vs_tcp [--ranks 2,4] [--mib 1,4,16,64] [--repeats 7] [--ring-bytes N] [--spin-us N]
//                   [--single-copy-bytes N (0: ring only)] [--seconds S (per measurement, 0.25)]
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/ring_allreduce.h"
#include "collectives/store.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "collectives/transport/shm/shm_transport.h"
#include "collectives/verify.h"

namespace {

using namespace ringbench;
using Clock = std::chrono::steady_clock;
constexpr int kKinds = 4;  // shm (forwarding), shm-ring, shm-copy, tcp

struct Args {
  std::vector<int> ranks = {2, 4};
  std::vector<size_t> mib = {1, 4, 16, 64};
  int repeats = 7;
  size_t ring_bytes = ShmOptions{}.ring_bytes;
  size_t single_copy_bytes = ShmOptions{}.single_copy_bytes;
  long spin_us = 200;
  double seconds = 0.25;
};

std::vector<long> parse_list(const char* s) {
  std::vector<long> v;
  for (char* end; *s; s = *end ? end + 1 : end) v.push_back(std::strtol(s, &end, 10));
  return v;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--ranks") {
      a.ranks.clear();
      for (long x : parse_list(v)) a.ranks.push_back(static_cast<int>(x));
    } else if (k == "--mib") {
      a.mib.clear();
      for (long x : parse_list(v)) a.mib.push_back(static_cast<size_t>(x));
    } else if (k == "--repeats") {
      a.repeats = std::atoi(v);
    } else if (k == "--ring-bytes") {
      a.ring_bytes = std::strtoull(v, nullptr, 10);
    } else if (k == "--single-copy-bytes") {
      a.single_copy_bytes = std::strtoull(v, nullptr, 10);
    } else if (k == "--spin-us") {
      a.spin_us = std::atol(v);
    } else if (k == "--seconds") {
      a.seconds = std::atof(v);
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// One rank's part: both transports, then every (size, repeat, transport) measurement in the
// same order on every rank. `seconds_out[m]` gets this rank's time per allreduce.
void rank_main(int rank, int n, Store& store, const Args& a, std::barrier<>& sync,
               std::vector<std::vector<double>>& per_rank_seconds) {
  ShmOptions so;
  so.ring_bytes = a.ring_bytes;
  so.single_copy_bytes = a.single_copy_bytes;
  so.spin = std::chrono::microseconds(a.spin_us);
  TcpOptions to;
  to.spin = std::chrono::microseconds(a.spin_us);
  ShmOptions in_ring = so;
  in_ring.forward = false;
  in_ring.key_prefix = "shm-ring";
  ShmOptions copying = so;
  copying.reduce_in_ring = false;
  copying.key_prefix = "shm-copy";
  std::unique_ptr<Transport> ts[kKinds] = {make_shm_transport(store, rank, n, so),
                                           make_shm_transport(store, rank, n, in_ring),
                                           make_shm_transport(store, rank, n, copying),
                                           make_tcp_transport(store, rank, n, to)};
  const size_t max_count = a.mib.back() << 18;
  std::vector<float> in(max_count), out(max_count);
  fill_input(DType::f32, in.data(), max_count, rank, n);
  std::unique_ptr<RingAllreduce> rings[kKinds];
  for (int k = 0; k < kKinds; ++k)
    rings[k] = std::make_unique<RingAllreduce>(*ts[k], in.data(), out.data(), max_count, DType::f32, ReduceOp::sum);
  auto& mine = per_rank_seconds[rank];
  for (size_t mib : a.mib) {
    const size_t count = mib << 18;
    const int iters = std::max(2, static_cast<int>(a.seconds * 2e9 / static_cast<double>(mib << 20)));
    for (int rep = 0; rep < a.repeats; ++rep)
      for (int k = 0; k < kKinds; ++k) {
        rings[k]->run(count);  // warm-up
        sync.arrive_and_wait();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) rings[k]->run(count);
        mine.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters);
      }
  }
  if (count_wrong(DType::f32, out.data(), a.mib.back() << 18, n, ReduceOp::sum) != 0)
    std::fprintf(stderr, "rank %d: WRONG RESULT\n", rank);
}

void run_ranks(int n, const Args& a) {
  InProcStore store;
  std::barrier<> sync(n);
  std::vector<std::vector<double>> secs(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { rank_main(r, n, store, a, sync, secs); });
  for (auto& t : threads) t.join();
  size_t m = 0;
  for (size_t mib : a.mib) {
    std::vector<double> bw[kKinds];
    for (int rep = 0; rep < a.repeats; ++rep)
      for (int k = 0; k < kKinds; ++k, ++m) {
        double slowest = 0;
        for (auto& s : secs) slowest = std::max(slowest, s[m]);
        bw[k].push_back(static_cast<double>(mib << 20) / slowest * 2 * (n - 1) / n / 1e9);
      }
    auto row = [&](int k) {
      return std::to_string(median(bw[k])).substr(0, 5) + " [" + std::to_string(*std::min_element(bw[k].begin(), bw[k].end())).substr(0, 5) +
             "-" + std::to_string(*std::max_element(bw[k].begin(), bw[k].end())).substr(0, 5) + "]";
    };
    std::printf("N=%d %3zu MiB | shm %-22s | shm-ring %-22s | shm-copy %-22s | tcp %-22s | shm/tcp %.2f | "
                "shm/shm-ring %.2f\n", n, mib, row(0).c_str(), row(1).c_str(), row(2).c_str(), row(3).c_str(),
                median(bw[0]) / median(bw[3]), median(bw[0]) / median(bw[1]));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::printf("ring allreduce f32 sum, busbw GB/s: median [min-max] of %d repeats, shm ring_bytes %zu, "
              "single_copy_bytes %zu, spin %ld us\n", a.repeats, a.ring_bytes, a.single_copy_bytes, a.spin_us);
  for (int n : a.ranks) run_ranks(n, a);
}
