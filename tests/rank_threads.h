// Runs `n` ranks as threads of this process, each with its own TCP transport over loopback,
// rendezvousing through an in-process store. Rethrows the first rank's exception.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/store.h"
#include "collectives/transport/tcp/tcp_transport.h"

namespace ringbench::testing {

// Runs body(rank) for ranks 0..n-1 on threads of their own and joins them; rethrows the first
// exception a rank threw.
inline void run_threads(int n, const std::function<void(int rank)>& body) {
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        std::lock_guard lk(mu);
        if (!first) first = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

inline void run_ranks(int n, const std::function<void(Transport&)>& body,
                      TcpOptions opts = {}) {
  InProcStore store;
  run_threads(n, [&](int r) {
    auto t = make_tcp_transport(store, r, n, opts);
    body(*t);
  });
}

}  // namespace ringbench::testing
