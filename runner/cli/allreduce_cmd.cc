#include "runner/cli/allreduce_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "runner/backends/backend.h"
#include "runner/cli/collective.h"
#include "runner/cli/allreduce_rows.h"
#include "base/bytes.h"
#include "runner/cli/gpu.h"
#include "runner/cli/metadata.h"
#include "runner/cli/world.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
using Millis = std::chrono::milliseconds;

struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : bytes(std::max<size_t>(n, 64)) {
    data = static_cast<char*>(::operator new(bytes, std::align_val_t(64)));
    std::memset(data, 0, bytes);  // fault the pages in now, not in the timed loop
  }
  ~AlignedBuffer() { ::operator delete(data, std::align_val_t(64)); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  size_t bytes;
  char* data;
};


void validate(const AllreduceArgs& a, size_t minb, size_t maxb) {
  if (minb > maxb)
    throw Error("-b/--minbytes (" + a.minbytes + ") is larger than -e/--maxbytes (" + a.maxbytes + ")");
  if (!(a.factor >= 1.01) && minb != maxb) throw Error("-f/--stepfactor must be at least 1.01");
  if (a.iters < 1) throw Error("-n/--iters must be >= 1");
  if (a.warmup < 0) throw Error("-w/--warmup_iters must be >= 0");
  if (!(a.timeout_s >= 0.1)) throw Error("--timeout must be at least 0.1 seconds");
  if (const size_t sb = parse_bytes(a.socket_buffer); sb != 0 && (sb < (size_t{64} << 10) || sb > (size_t{1} << 30)))
    throw Error("--socket-buffer " + a.socket_buffer + ": must be 0 (the kernel's autotuning) or 64K to 1G; "
                "smaller buffers stall the ring's segments");
  // The input and output buffers of the largest size, plus the staging copies: refuse at once
  // what this machine cannot hold, rather than failing in an allocation.
  const double need_gib = 2.0 * double(maxb) / double(1 << 30);
  const double have_gib = physical_memory_gib();
  if (need_gib > have_gib)
    throw Error("-e/--maxbytes " + a.maxbytes + " needs " + std::to_string(int(std::ceil(need_gib))) +
                " GiB of buffers per rank; this machine has " + std::to_string(std::lround(have_gib)) + " GiB");
  if (a.spin_us < 0) throw Error("--spin-us must be >= 0");
  validate_backend_options();
  if (writes_results()) check_output_path(a.json, "--json");
}

bool not_ring(const Backend& b) { return !b.ring; }

// --impl ring runs our ring over --transport; any other --impl is a backend of its own. What
// this build or host cannot run fails here, before any rank starts, once.
const Backend& chosen_backend(const AllreduceArgs& a) {
  const Backend& ring = backend_for("--transport", a.transport, is_ring);
  const Backend* b = a.impl == "ring" ? &ring : find_backend(a.impl);
  if (!b || (a.impl != "ring" && b->ring)) throw Error("--impl " + a.impl + " is not known: use ring, " + backend_names(not_ring));
  const std::string option = b->ring ? "--transport " : "--impl ";
  if (const std::string why = b->unavailable ? b->unavailable() : ""; !why.empty())
    throw Error(option + b->name + " is not available: " + why);
  return *b;
}

NetArgs net_args(const AllreduceArgs& a) {
  NetArgs net;
  net.addr = a.addr;
  net.iface = a.iface;
  net.sockets_per_peer = a.sockets_per_peer;
  net.socket_buffer_bytes = static_cast<int>(parse_bytes(a.socket_buffer));
  net.spin = std::chrono::microseconds(a.spin_us);
  return net;
}

}  // namespace

int run_allreduce(const AllreduceArgs& a, const std::vector<std::string>& argv) {
  const size_t minb = parse_bytes(a.minbytes), maxb = parse_bytes(a.maxbytes);
  const DType dtype = parse_dtype(a.dtype);
  const ReduceOp op = parse_op(a.op);
  validate(a, minb, maxb);
  const Backend& backend = chosen_backend(a);
  const Collective& coll = allreduce_collective();
  const Millis timeout(static_cast<long>(a.timeout_s * 1000));
  if (auto code = launch_ranks_here(a.ranks, backend.gpu_buffers ? "--impl " + backend.name : "", argv, timeout))
    return *code;
  auto world = make_command_world({a.ranks, a.addr, a.iface, a.secret_file, timeout}, backend.needs_mpirun);
  const int rank = world->rank, n = world->size;
  Store& store = *world->store;
  const std::string tag = "[rank " + std::to_string(rank) + "] ";

  json meta;
  std::vector<json> rows;
  auto write_json = [&](const std::string& error) {
    if (rank != 0 || a.json.empty()) return;
    json doc = {{"meta", meta}, {"rows", rows}};
    if (!error.empty()) doc["error"] = error;
    write_file_atomic(a.json, doc.dump(2) + "\n");
  };
  uint64_t total_wrong = 0;
  try {
    // Every rank must run the same sweep; compare the options that shape it with rank 0's.
    const std::string shape = "-b " + std::to_string(minb) + " -e " + std::to_string(maxb) +
                              " -f " + std::to_string(a.factor) + " -n " + std::to_string(a.iters) +
                              " -w " + std::to_string(a.warmup) + " -c " + std::to_string(a.check) +
                              " --impl " + a.impl + " --transport " + a.transport + " --dtype " + dtype_name(dtype) + " --op " +
                              op_name(op) + " --segment " + a.segment + " --min-segment " + a.min_segment +
                              " --algo " + a.algo + " --direct-max " + a.direct_max;
    // Every rank checks every rank, so all of them stop with the same message.
    check_same_options(store, "allreduce/shape", shape, rank, n, timeout, "run the same sweep");

    const size_t es = dtype_size(dtype);
    const size_t max_count = maxb / es;
    AlignedBuffer in(max_count * es), out(max_count * es);

    if (backend.gpu_buffers) use_local_gpu(*world);
    auto comm = backend.make({store, rank, n, *world, timeout, net_args(a), "allreduce"});
    json path;
    for (auto& [k, v] : comm->path_info()) path[k] = v;
    AllreduceOptions ao;  // our ring's; other backends have their own
    ao.ring.segment_bytes = parse_bytes(a.segment);
    ao.ring.min_segment_bytes = parse_bytes(a.min_segment);
    ao.ring.depth = a.depth;
    ao.ring.timeout = 2 * timeout;
    ao.algo = parse_algo(a.algo);
    ao.direct_max_bytes = parse_bytes(a.direct_max);
    const std::unique_ptr<AllreducePlan> impl = coll.plan(*comm, in.data, out.data, max_count, dtype, op, ao);
    json self = host_info();
    self["rank"] = rank;
    self["path"] = path;
    self["gpu"] = gpu_json();
    store.set("allreduce/meta/" + std::to_string(rank), self.dump());

    if (rank == 0) {
      json hosts = json::array();
      for (int r = 0; r < n; ++r)
        hosts.push_back(get_rank_json(store, "allreduce/meta/" + std::to_string(r), r, timeout));
      meta = {{"command", argv},
              {"collective", coll.name},
              {"impl", a.impl},
              {"transport", backend.name},
              {"launcher", world->launcher},
              {"ranks", n},
              {"job_id", world->job_id},
              {"store", store.describe()},
              {"dtype", dtype_name(dtype)},
              {"op", op_name(op)},
              {"options", {{"minbytes", minb}, {"maxbytes", maxb}, {"stepfactor", a.factor},
                           {"iters", a.iters}, {"warmup_iters", a.warmup}, {"check", a.check},
                           {"timeout_s", a.timeout_s}, {"segment_bytes", parse_bytes(a.segment)},
                           {"min_segment_bytes", parse_bytes(a.min_segment)},
                           {"depth", a.depth}, {"sockets_per_peer", a.sockets_per_peer},
                           {"algo", a.algo}, {"direct_max_bytes", parse_bytes(a.direct_max)}}},
              {"build", build_info()},
              {"hosts", hosts}};
      if (backend.options_json) meta["options"].update(backend.options_json());
      auto b = build_info();
      std::printf("# ringbench %s (%s) allreduce: %s over %s, %d ranks, launcher %s, store %s\n",
                  b["ringbench"].get<std::string>().c_str(), b["commit"].get<std::string>().c_str(),
                  backend.title.c_str(), backend.over.c_str(),
                  n, world->launcher.c_str(), store.describe().c_str());
      std::printf("# build: %s | MPI: %s | reduce kernels: %s\n",
                  b["compiler"].get<std::string>().c_str(), b["mpi"].get<std::string>().c_str(),
                  hosts[0]["reduce_isa"].get<std::string>().c_str());
      std::printf("# options: -b %zu -e %zu -f %g -n %d -w %d -c %d --dtype %s --op %s --timeout %g",
                  minb, maxb, a.factor, a.iters, a.warmup, a.check, dtype_name(dtype), op_name(op),
                  a.timeout_s);
      if (backend.ring)
        std::printf(" --segment %zu --min-segment %zu --depth %d --sockets-per-peer %d --spin-us %d --algo %s --direct-max %zu",
                    parse_bytes(a.segment), parse_bytes(a.min_segment), a.depth, a.sockets_per_peer,
                    a.spin_us, a.algo.c_str(),
                    parse_bytes(a.direct_max));
      if (backend.options_line) std::printf("%s", backend.options_line().c_str());
      std::printf("\n");
      if (backend.ring)
        std::printf("# algorithm per row: %s\n",
                    a.algo == "auto" ? ((n > 2 && (n & (n - 1)) == 0 ? "rd (recursive doubling)"
                                                                       : "direct (one-shot)") +
                                        std::string(" up to ") +
                                        std::to_string(parse_bytes(a.direct_max)) + " B, ring above")
                                           .c_str()
                                     : a.algo.c_str());
      for (auto& h : hosts) {
        std::printf("#  rank %2d  host %s  pid %d  cpu %s  path:", h["rank"].get<int>(),
                    h["host"].get<std::string>().c_str(), h["pid"].get<int>(),
                    h["cpu"].get<std::string>().c_str());
        for (auto& [k, v] : h["path"].items()) std::printf(" %s=%s", k.c_str(), v.get<std::string>().c_str());
        std::printf("\n");
      }
      print_gpu_lines(hosts);
      std::printf("#\n#%66s%-34s %s\n", "", "out-of-place", "in-place");
      std::printf("#%11s %13s %9s %6s %6s %10s %8s %8s %7s %10s %8s %8s %7s\n", "size", "count",
                  "type", "redop", "algo", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                  "busbw", "#wrong");
      std::printf("#%11s %13s %9s %6s %6s %10s %8s %8s %7s %10s %8s %8s %7s\n", "(B)",
                  "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                  "(GB/s)", "");
      std::fflush(stdout);
      write_json("");
    }

    double busbw_sum = 0;
    int busbw_rows = 0, point = 0;
    for (size_t bytes = minb;;) {
      const size_t count = bytes / es;
      Row results[2];
      std::string row_algo;
      for (int ip = 0; ip < 2; ++ip) {
        const bool inplace = ip == 1;
        char* result = out.data;
        const char* algo = "";
        Measured m;
        coll.fill(dtype, inplace ? out.data : in.data, count, rank, n);
        impl->load_input(count, inplace);  // device implementations: to the GPU
        if (a.check) {
          algo = impl->run(count, inplace);
          impl->fetch_result(count);
          m.wrong = coll.check(dtype, result, count, n, op);
        }
        for (int i = 0; i < a.warmup; ++i) impl->run(count, inplace);
        for (int i = 0; i < a.iters; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          algo = impl->run(count, inplace);
          m.us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
        const std::string key = "allreduce/point/" + std::to_string(point++) + "/";
        store.set(key + std::to_string(rank), pack(m));
        if (rank == 0) {
          std::vector<Measured> all;
          for (int r = 0; r < n; ++r) {
            const std::string rank_key = key + std::to_string(r);
            all.push_back(unpack(get_from_rank(store, rank_key, r, 2 * timeout), rank_key, r, a.iters, count));
          }
          results[ip] = summarize(all, count * es, coll.busbw_factor(n));
          total_wrong += results[ip].wrong;
          rows.push_back({{"bytes", count * es}, {"count", count}, {"dtype", dtype_name(dtype)},
                          {"op", op_name(op)}, {"inplace", inplace}, {"algo", algo},
                          {"time_us", results[ip].time_us}, {"p50_us", results[ip].p50_us},
                          {"p99_us", results[ip].p99_us}, {"algbw_gbps", results[ip].algbw},
                          {"busbw_gbps", results[ip].busbw},
                          {"wrong", a.check ? json(results[ip].wrong) : json(nullptr)}});
          busbw_sum += results[ip].busbw;
          row_algo = algo;
          ++busbw_rows;
        } else {
          total_wrong += m.wrong;
        }
      }
      if (rank == 0) {
        auto wrong = [&](const Row& r) { return a.check ? std::to_string(r.wrong) : std::string("N/A"); };
        std::printf("%12zu %13zu %9s %6s %6s %10.1f %8.3f %8.3f %7s %10.1f %8.3f %8.3f %7s\n",
                    count * es, count, dtype_name(dtype), op_name(op), row_algo.c_str(),
                    results[0].time_us, results[0].algbw,
                    results[0].busbw, wrong(results[0]).c_str(), results[1].time_us,
                    results[1].algbw, results[1].busbw, wrong(results[1]).c_str());
        std::fflush(stdout);
        write_json("");
      }
      if (bytes >= maxb) break;
      size_t next = static_cast<size_t>(std::ceil(static_cast<double>(bytes) * a.factor));
      bytes = std::min(maxb, std::max(next, bytes + es));  // from 0, the next size is 1 element
    }
    if (rank == 0) {
      std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(total_wrong),
                  !a.check ? "(not checked: -c 0)" : total_wrong ? "FAILED" : "OK");
      std::printf("# Avg bus bandwidth    : %.3f GB/s\n#\n", busbw_rows ? busbw_sum / busbw_rows : 0.0);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << tag + "ringbench allreduce: error: " + e.what() + "\n" << std::flush;  // one write per line
    try {
      write_json(e.what());
    } catch (const std::exception& e2) {
      std::cerr << tag + "ringbench allreduce: the error is not in the JSON either: " + e2.what() + "\n";
    }
    world->mpi = false;  // MPI_Finalize could wait for ranks that died; mpirun ends the job
    return 1;
  }
  if (total_wrong) std::cerr << tag + std::to_string(total_wrong) + " wrong elements\n";
  return total_wrong ? 2 : 0;
}

}  // namespace ringbench
