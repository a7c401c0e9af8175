// Gloo's collectives on this machine, for bench/collectives_vs_gloo_mpi.sh: N forked ranks over
// Gloo's TCP transport on loopback (a FileStore in a temporary directory for the rendezvous),
// one algorithm per run, sizes from -b to -e by x4. Per size: the slowest rank's mean time of
// `iters` runs after `warmup`, and busbw with nccl-tests' factor, in ringbench's row format:
//   bytes time_us algbw_GBps busbw_GBps
// Sizes are each rank's message as ringbench counts it (allgather: the gathered total;
// reducescatter and alltoall: each rank's input; broadcast and allreduce: the buffer).
//
//   gloo_bench OP ALGO RANKS MINBYTES MAXBYTES ITERS [NETNS_PREFIX]
// With NETNS_PREFIX (an emulated cluster's: `ringbench cluster up` makes "ringbench"), rank k
// runs in namespace NETNS_PREFIX-n<k> over its eth0 address instead of on loopback (needs root),
// pinned to the k-th of this process's CPUs (mod their number) as a sweep pins node k's rank.
//   OP/ALGO: allgather/{ring,new}  reducescatter/hd  broadcast/{one_to_all,new}  alltoall/new
//            allreduce/{ring,ring_chunked,hd,bcube}
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

namespace {

using Ctx = std::shared_ptr<gloo::Context>;

struct Args {
  std::string op, algo;
  int ranks;
  size_t minb, maxb;
  int iters;
  std::string netns_prefix;  // empty: loopback
};

double factor(const std::string& op, int n) {
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (op == "broadcast") return 1.0;
  return double(n - 1) / n;
}

// The run of one algorithm over buffers for `bytes`, set up once (Gloo's constructor does the
// setup; run() is what is timed).
std::function<void()> make_run(const Args& a, const Ctx& ctx, size_t bytes, std::vector<float>& in,
                               std::vector<float>& out) {
  const int n = ctx->size;
  const size_t count = bytes / sizeof(float), block = count / static_cast<size_t>(n);
  if (a.op == "allgather" && a.algo == "ring") {
    auto alg = std::make_shared<gloo::AllgatherRing<float>>(ctx, std::vector<const float*>{in.data()}, out.data(),
                                                            static_cast<int>(block));
    return [alg] { alg->run(); };
  }
  if (a.op == "allgather" && a.algo == "new")
    return [&, ctx, block] {
      gloo::AllgatherOptions o(ctx);
      o.setInput(in.data(), block);
      o.setOutput(out.data(), block * static_cast<size_t>(ctx->size));
      gloo::allgather(o);
    };
  if (a.op == "reducescatter" && a.algo == "hd") {
    auto alg = std::make_shared<gloo::ReduceScatterHalvingDoubling<float>>(
        ctx, std::vector<float*>{in.data()}, static_cast<int>(block * n), std::vector<int>(n, static_cast<int>(block)));
    return [alg] { alg->run(); };
  }
  if (a.op == "broadcast" && a.algo == "one_to_all") {
    auto alg = std::make_shared<gloo::BroadcastOneToAll<float>>(ctx, std::vector<float*>{out.data()}, count, 0);
    return [alg] { alg->run(); };
  }
  if (a.op == "broadcast" && a.algo == "new")
    return [&, ctx, count] {
      gloo::BroadcastOptions o(ctx);
      o.setRoot(0);
      o.setOutput(out.data(), count);
      gloo::broadcast(o);
    };
  if (a.op == "alltoall" && a.algo == "new")
    return [&, ctx, block] {
      gloo::AlltoallOptions o(ctx);
      o.setInput(in.data(), block * static_cast<size_t>(ctx->size));
      o.setOutput(out.data(), block * static_cast<size_t>(ctx->size));
      gloo::alltoall(o);
    };
  const std::vector<float*> ptrs{out.data()};
  const int c = static_cast<int>(count);
  std::shared_ptr<gloo::Algorithm> alg;
  if (a.op == "allreduce" && a.algo == "ring") alg = std::make_shared<gloo::AllreduceRing<float>>(ctx, ptrs, c);
  if (a.op == "allreduce" && a.algo == "ring_chunked")
    alg = std::make_shared<gloo::AllreduceRingChunked<float>>(ctx, ptrs, c);
  if (a.op == "allreduce" && a.algo == "hd") alg = std::make_shared<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, c);
  if (a.op == "allreduce" && a.algo == "bcube") alg = std::make_shared<gloo::AllreduceBcube<float>>(ctx, ptrs, c);
  if (!alg) {
    std::fprintf(stderr, "gloo_bench: no algorithm %s for %s\n", a.algo.c_str(), a.op.c_str());
    std::exit(2);
  }
  return [alg] { alg->run(); };
}

// Enters namespace `ns` and returns its eth0 IPv4 address; exits the rank on failure.
std::string enter_netns(const std::string& ns) {
  const std::string path = "/run/netns/" + ns;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    std::perror(("gloo_bench: cannot enter " + path).c_str());
    std::_Exit(2);
  }
  ::close(fd);
  ifaddrs* list = nullptr;
  std::string addr;
  if (::getifaddrs(&list) == 0)
    for (ifaddrs* i = list; i; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && std::string(i->ifa_name) == "eth0") {
        char buf[INET_ADDRSTRLEN];
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
        addr = buf;
      }
  ::freeifaddrs(list);
  if (addr.empty()) {
    std::fprintf(stderr, "gloo_bench: %s has no IPv4 address on eth0\n", ns.c_str());
    std::_Exit(2);
  }
  return addr;
}

void pin_like_node(int rank) {
  cpu_set_t allowed, one;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  const int count = CPU_COUNT(&allowed);
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE && count; ++cpu)
    if (CPU_ISSET(cpu, &allowed) && seen++ == rank % count) {
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ::sched_setaffinity(0, sizeof one, &one);
      return;
    }
}

int rank_main(const Args& a, int rank, const std::string& dir) {
  if (!a.netns_prefix.empty()) pin_like_node(rank);
  gloo::transport::tcp::attr attr;
  attr.hostname = a.netns_prefix.empty() ? "127.0.0.1"
                                         : enter_netns(a.netns_prefix + "-n" + std::to_string(rank));
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, a.ranks);
  ctx->setTimeout(std::chrono::seconds(60));
  ctx->connectFullMesh(store, dev);
  std::vector<float> in(a.maxb / sizeof(float) + 64, 1.0f), out(a.maxb / sizeof(float) + 64, 1.0f);
  gloo::BarrierAllToAll barrier(ctx);
  for (size_t bytes = a.minb; bytes <= a.maxb; bytes *= 4) {
    auto run = make_run(a, ctx, bytes, in, out);
    run();  // warmup
    run();
    barrier.run();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.iters; ++i) run();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / a.iters;
    std::vector<double> all(static_cast<size_t>(a.ranks));
    gloo::AllgatherOptions o(ctx);
    o.setInput(&us, 1);
    o.setOutput(all.data(), all.size());
    gloo::allgather(o);
    if (rank == 0) {
      const double slowest = *std::max_element(all.begin(), all.end());
      const double algbw = double(bytes) / slowest / 1e3;
      std::printf("%12zu %12.1f %10.3f %10.3f\n", bytes, slowest, algbw, algbw * factor(a.op, a.ranks));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr, "usage: gloo_bench OP ALGO RANKS MINBYTES MAXBYTES ITERS [NETNS_PREFIX]\n");
    return 2;
  }
  const Args a{argv[1],          argv[2],          std::atoi(argv[3]), std::stoul(argv[4]),
               std::stoul(argv[5]), std::atoi(argv[6]), argc == 8 ? argv[7] : ""};
  if (a.ranks < 2 || a.ranks > 64 || a.iters < 1 || a.minb < 4 * sizeof(float) * 64 || a.minb > a.maxb) {
    std::fprintf(stderr, "gloo_bench: RANKS 2..64, ITERS >= 1, 1K <= MINBYTES <= MAXBYTES\n");
    return 2;
  }
  char tmpl[] = "/tmp/gloo_bench.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string where = a.netns_prefix.empty() ? "loopback" : "namespaces " + a.netns_prefix + "-n<rank>";
  std::printf("# gloo %s/%s, %d ranks over tcp on %s; bytes time_us algbw_GBps busbw_GBps\n", a.op.c_str(),
              a.algo.c_str(), a.ranks, where.c_str());
  std::fflush(stdout);
  std::vector<pid_t> kids;
  for (int r = 0; r < a.ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) std::_Exit(rank_main(a, r, dir));
    kids.push_back(pid);
  }
  int failed = 0;
  for (pid_t p : kids) {
    int status = 0;
    waitpid(p, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::filesystem::remove_all(dir);
  return failed ? 1 : 0;
}
