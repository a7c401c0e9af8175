#include "runner/cli/allreduce_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <optional>
#include <nlohmann/json.hpp>

#include "base/cpu_time.h"
#include "base/errors.h"
#include "runner/backends/backend.h"
#include "runner/backends/collective.h"
#include "runner/backends/hierarchical.h"
#include "runner/cli/command.h"
#include "runner/cli/allreduce_rows.h"
#include "base/bytes.h"
#include "runner/job/gpu.h"
#include "runner/job/metadata.h"
#include "runner/job/world.h"
#include "runner/record/algo_table.h"

namespace ringbench {

using json = nlohmann::json;  // not in the anonymous namespace: clang -Wshadow, unity batches

namespace {

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


// --algo-table: this run's entry (transport, N), or an Error naming the file and what it has.
std::optional<AlgoTableEntry> table_entry(const AllreduceArgs& a, const std::string& transport, int n) {
  if (a.algo_table.empty()) return std::nullopt;
  const AlgoTable t = read_algo_table(a.algo_table);
  if (const AlgoTableEntry* e = find_entry(t, transport, n)) return *e;
  std::string has;
  for (const auto& e : t.entries) has += (has.empty() ? "" : ", ") + e.transport + " N=" + std::to_string(e.nodes);
  throw Error("--algo-table " + a.algo_table + ": no entry for " + transport + " N=" + std::to_string(n) + " (it has " +
              has + "); measure that N in a sweep and run predict again, or drop --algo-table for the built-in rule");
}

std::vector<AlgoRange> algo_ranges(const AlgoTableEntry& e) {
  std::vector<AlgoRange> out;
  for (const auto& r : e.ranges) out.push_back({r.to_bytes.value_or(SIZE_MAX), parse_algo(r.algo)});
  return out;
}

AllreduceOptions allreduce_options(const AllreduceArgs& a, Millis timeout, const AlgoTableEntry* table) {
  AllreduceOptions ao;  // our ring's; other backends have their own
  ao.ring.segment_bytes = parse_bytes(a.segment);
  ao.ring.min_segment_bytes = parse_bytes(a.min_segment);
  ao.ring.depth = a.depth;
  ao.ring.timeout = 2 * timeout;
  ao.algo = parse_algo(a.algo);
  ao.direct_max_bytes = parse_bytes(a.direct_max);
  if (table) ao.table = algo_ranges(*table);
  return ao;
}

std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(1 << 30));
  return buf;
}

// The input and output buffers of the largest size and our algorithm's scratch (both plans',
// runner/backends/collective.h), times the ranks this machine holds (--ranks N: all of them;
// under a launcher, --ranks-per-node): refused at once when this machine cannot hold them,
// rather than failing in an allocation or being OOM-killed midway. MPI's and NCCL's own
// buffers are theirs, not counted.
void check_memory(const AllreduceArgs& a, size_t maxb, size_t esize, const AlgoTable* algo_table) {
  const int ranks = a.ranks > 1 ? a.ranks : std::max(1, world_size_from_env());
  const int here = a.ranks > 1 || launched_by_env() ? ranks : std::max(1, a.ranks_per_node);
  const Collective& c = *a.collective;
  // --algo-table: what it chooses here, where it has this N (no entry: the job fails on it at
  // start, naming the file)
  const AlgoTableEntry* table = algo_table ? find_entry(*algo_table, a.impl == "ring" ? a.transport : a.impl, ranks) : nullptr;
  const AllreduceOptions o = allreduce_options(a, Millis(0), table);
  const double scratch = a.impl == "ring" && c.scratch_bytes ? double(c.scratch_bytes(maxb / esize, esize, ranks, o)) : 0;
  const double per_rank = 2.0 * double(maxb) + scratch, have = physical_memory_gib() * double(1 << 30);
  if (per_rank * here <= have) return;
  std::string need = gib_text(per_rank) + " of buffers per rank (input, output";
  if (scratch > 0) need += " and " + gib_text(scratch) + " of " + c.name + "'s scratch";
  need += ")";
  if (here > 1) need += ", " + gib_text(per_rank * here) + " for the " + std::to_string(here) + " ranks on this machine";
  throw Error("-e/--maxbytes " + a.maxbytes + " needs " + need + "; this machine has " + gib_text(have));
}

void validate(const AllreduceArgs& a, size_t minb, size_t maxb, size_t esize) {
  if (minb > maxb)
    throw Error("-b/--minbytes (" + a.minbytes + ") is larger than -e/--maxbytes (" + a.maxbytes + ")");
  if (!(a.factor >= 1.01) && minb != maxb) throw Error("-f/--stepfactor must be at least 1.01");
  if (a.iters < 1) throw Error("-n/--iters must be >= 1");
  if (a.warmup < 0) throw Error("-w/--warmup_iters must be >= 0");
  if (!(a.timeout_s >= 0.1)) throw Error("--timeout must be at least 0.1 seconds");
  if (const size_t sb = parse_bytes(a.socket_buffer); sb != 0 && (sb < (size_t{64} << 10) || sb > (size_t{1} << 30)))
    throw Error("--socket-buffer " + a.socket_buffer + ": must be 0 (the kernel's autotuning) or 64K to 1G; "
                "smaller buffers stall the ring's segments");
  if (a.spin_us < 0) throw Error("--spin-us must be >= 0");
  parse_algo(a.algo);  // an unknown name fails here, once, before any rank starts
  if (a.algo != "auto" && !a.collective->takes_algo)
    throw Error("--algo " + a.algo + ": " + a.collective->name + " has one algorithm per backend; --algo is allreduce's");
  std::optional<AlgoTable> algo_table;
  if (!a.algo_table.empty()) {
    if (a.algo != "auto") throw Error("--algo-table chooses for --algo auto, not --algo " + a.algo);
    if (a.impl != "ring") throw Error("--algo-table chooses our allreduce's algorithm; --impl " + a.impl + " has its own");
    if (!a.collective->takes_algo) throw Error("--algo-table: " + a.collective->name + " has one algorithm; the table is allreduce's");
    if (a.hierarchical) throw Error("--algo-table: not with --hierarchical (its levels use the built-in rule)");
    algo_table = read_algo_table(a.algo_table);  // a bad file fails here, once, before any rank starts
  }
  check_local_ranks(a.ranks);  // before the memory, which grows with the ranks
  check_memory(a, maxb, esize, algo_table ? &*algo_table : nullptr);
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
  if (a.ranks_per_node < 1) throw Error("--ranks-per-node must be at least 1 (got " + std::to_string(a.ranks_per_node) + ")");
  if (a.hierarchical && !a.collective->takes_algo)
    throw Error("--hierarchical: " + a.collective->name + " has no hierarchical algorithm; only allreduce has");
  // The world's size is known here only for --ranks N; under mpirun each rank checks it as it connects.
  if (const std::string why = a.hierarchical ? hierarchical_unfit(a.ranks > 1 ? a.ranks : a.ranks_per_node, a.ranks_per_node, *b) : "";
      !why.empty())
    throw Error(why);
  return *b;
}

NetArgs net_args(const AllreduceArgs& a) {
  NetArgs net;
  net.addr = a.addr;
  net.iface = a.iface;
  net.sockets_per_peer = a.sockets_per_peer;
  net.socket_buffer_bytes = static_cast<int>(parse_bytes(a.socket_buffer));
  net.spin = std::chrono::microseconds(a.spin_us);
  net.hierarchical = a.hierarchical;
  net.ranks_per_node = a.ranks_per_node;
  net.hier_chunk_bytes = parse_bytes(a.hier_chunk);
  return net;
}

// The sweep the options ask for, parsed and checked (before any rank starts).
struct Sweep {
  const AllreduceArgs& a;
  size_t minb = 0, maxb = 0;
  DType dtype{};
  ReduceOp op{};
  size_t es = 0;  // bytes per element
};

Sweep parse_sweep(const AllreduceArgs& a) {
  Sweep s{a};
  s.minb = parse_bytes(a.minbytes);
  s.maxb = parse_bytes(a.maxbytes);
  s.dtype = parse_dtype(a.dtype);
  s.op = parse_op(a.op);
  s.es = dtype_size(s.dtype);
  validate(a, s.minb, s.maxb, s.es);
  return s;
}

// The op column: none for a collective that does not reduce.
const char* op_shown(const Sweep& s) { return s.a.collective->reduces ? op_name(s.op) : "none"; }

// The options that shape the sweep: every rank must run the same one.
std::string sweep_shape(const Sweep& s, const AlgoTableEntry* table) {
  const AllreduceArgs& a = s.a;
  return a.collective->name + " -b " + std::to_string(s.minb) + " -e " + std::to_string(s.maxb) + " -f " + std::to_string(a.factor) +
         " -n " + std::to_string(a.iters) + " -w " + std::to_string(a.warmup) + " -c " + std::to_string(a.check) +
         " --impl " + a.impl + " --transport " + a.transport + " --dtype " + dtype_name(s.dtype) + " --op " +
         op_name(s.op) + " --segment " + a.segment + " --min-segment " + a.min_segment + " --algo " + a.algo +
         " --direct-max " + a.direct_max + " --ranks-per-node " + std::to_string(a.ranks_per_node) +
         (a.hierarchical ? " --hierarchical --hier-chunk " + a.hier_chunk : "") + (table ? " --algo-table: " + ranges_text(*table) : "");
}


json path_json(const Communicator& comm) {
  json path;
  for (auto& [k, v] : comm.path_info()) path[k] = v;
  return path;
}

json sweep_meta(const RankJob& job, const Sweep& s, const Backend& backend, const Collective& coll,
                const std::vector<std::string>& argv, const json& hosts, const AlgoTableEntry* table) {
  const AllreduceArgs& a = s.a;
  json meta = job.common_meta(argv, hosts);
  meta.update({{"collective", coll.name},
               {"impl", a.impl},
               {"transport", backend.name},
               {"store", job.store->describe()},
               {"dtype", dtype_name(s.dtype)},
               {"op", op_shown(s)},
               {"options", {{"minbytes", s.minb}, {"maxbytes", s.maxb}, {"stepfactor", a.factor},
                            {"iters", a.iters}, {"warmup_iters", a.warmup}, {"check", a.check},
                            {"timeout_s", a.timeout_s}, {"segment_bytes", parse_bytes(a.segment)},
                            {"min_segment_bytes", parse_bytes(a.min_segment)},
                            {"depth", a.depth}, {"sockets_per_peer", a.sockets_per_peer},
                            {"algo", a.algo}, {"direct_max_bytes", parse_bytes(a.direct_max)},
                            {"ranks_per_node", a.ranks_per_node}, {"hierarchical", a.hierarchical},
                            {"hier_chunk_bytes", parse_bytes(a.hier_chunk)},
                            {"algo_table", table ? json(a.algo_table) : json(nullptr)},
                            {"algo_table_ranges", table ? json(ranges_text(*table)) : json(nullptr)}}}});
  if (backend.options.as_run) meta["options"].update(options_json(backend.options.as_run()));
  return meta;
}

// The `#` lines above the table: build, options, algorithm, every rank's host and path, GPUs.
// What `auto` runs, per size: the table's ranges, or the built-in rule.
std::string auto_text(const AllreduceArgs& a, int n, const AlgoTableEntry* table) {
  if (table)
    return "auto from the cost table " + a.algo_table + " (" + table->transport + " N=" + std::to_string(n) +
           "): " + ranges_text(*table);
  return std::string("auto, built-in rule (no --algo-table): ") +
         (n > 2 && (n & (n - 1)) == 0 ? "rd (recursive doubling)" : "direct (one-shot)") + " up to " +
         std::to_string(parse_bytes(a.direct_max)) + " B, ring above";
}

void print_header(const RankJob& job, const Sweep& s, const Backend& backend, const json& hosts,
                  const AlgoTableEntry* table) {
  const AllreduceArgs& a = s.a;
  const Collective& coll = *a.collective;
  const int n = job.n;
  auto b = build_info();
  std::printf("# ringbench %s (%s) %s: %s over %s, %d ranks, launcher %s, store %s\n",
              b["ringbench"].get<std::string>().c_str(), b["commit"].get<std::string>().c_str(),
              coll.name.c_str(), coll.native ? backend.title.c_str() : backend.ring ? "ours" : backend.name.c_str(), backend.over.c_str(),
              n, job.world->launcher.c_str(), job.store->describe().c_str());
  std::printf("# build: %s | MPI: %s | reduce kernels: %s\n",
              b["compiler"].get<std::string>().c_str(), b["mpi"].get<std::string>().c_str(),
              hosts[0]["reduce_isa"].get<std::string>().c_str());
  std::printf("# options: -b %zu -e %zu -f %g -n %d -w %d -c %d --dtype %s --op %s --timeout %g",
              s.minb, s.maxb, a.factor, a.iters, a.warmup, a.check, dtype_name(s.dtype), op_name(s.op),
              a.timeout_s);
  if (backend.ring)
    std::printf(" --segment %zu --min-segment %zu --depth %d --sockets-per-peer %d --spin-us %d --algo %s --direct-max %zu",
                parse_bytes(a.segment), parse_bytes(a.min_segment), a.depth, a.sockets_per_peer,
                a.spin_us, a.algo.c_str(),
                parse_bytes(a.direct_max));
  if (table) std::printf(" --algo-table %s", a.algo_table.c_str());
  std::printf(" --ranks-per-node %d%s", a.ranks_per_node, a.hierarchical ? " --hierarchical" : "");
  if (a.hierarchical) std::printf(" --hier-chunk %zu", parse_bytes(a.hier_chunk));
  if (backend.options.as_run)
    std::printf(" --transport %s%s", backend.name.c_str(), options_line(backend.options.as_run()).c_str());
  std::printf("\n");
  if (a.hierarchical)
    std::printf("# algorithm per row: hier: reduce-scatter within each node of %d ranks over %s, allreduce of each "
                "rank's share across the %d nodes over %s (%s), allgather within the node; %s\n",
                a.ranks_per_node, hosts[0]["path"].value("intra.transport", "?").c_str(), n / a.ranks_per_node,
                backend.name.c_str(), a.algo == "auto" ? "rd or direct for small shares, ring above" : a.algo.c_str(),
                hosts[0]["path"].value("hierarchical.pipeline", "?").c_str());
  else if (backend.ring && coll.takes_algo)
    std::printf("# algorithm per row: %s\n", a.algo == "auto" ? auto_text(a, n, table).c_str() : a.algo.c_str());
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
}

// One rank's implementation of the collective over its buffers, sized for the largest count.
struct Bench {
  const Sweep& s;
  const Collective& coll;
  AllreducePlan& impl;
  char *in, *out;
};

// This rank's measurement of one point: the check's wrong elements (-c 1) and every timed
// iteration; `algo` is the algorithm that ran.
Measured measure(const Bench& b, const RankJob& job, size_t count, bool inplace, const char*& algo) {
  const AllreduceArgs& a = b.s.a;
  const size_t es = b.s.es;
  const CollectiveLayout at = b.coll.layout(count, job.rank, job.n, inplace);
  Measured m;
  // An element the collective never writes must not pass for a result left by an earlier row:
  // the result's place holds NaNs (all bits set) until the input goes in.
  if (a.check && at.out_count) std::memset(b.out + at.out_offset * es, 0xff, at.out_count * es);
  b.coll.fill(b.s.dtype, (inplace ? b.out : b.in) + at.in_offset * es, at.in_count, job.rank, job.n);
  b.impl.load_input(count, inplace);  // device implementations: to the GPU
  if (a.check) {
    algo = b.impl.run(count, inplace);
    b.impl.fetch_result(count);
    m.wrong = b.coll.check(b.s.dtype, b.out + at.out_offset * es, at.out_count, job.rank, job.n, b.s.op);
  }
  for (int i = 0; i < a.warmup; ++i) b.impl.run(count, inplace);
  const double cpu0 = process_cpu_seconds();
  for (int i = 0; i < a.iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    algo = b.impl.run(count, inplace);
    m.us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  m.cpu_us = a.iters > 0 ? 1e6 * (process_cpu_seconds() - cpu0) / a.iters : 0;
  return m;
}

// The table so far: rank 0's rows, and the wrong elements (rank 0: every rank's; the others:
// their own).
struct Table {
  std::vector<json> rows;
  double busbw_sum = 0;
  int busbw_rows = 0, point = 0;
  uint64_t total_wrong = 0;
};

// Every rank measures the point and publishes it; rank 0 summarises every rank's into a row.
Row run_point(const Bench& b, const RankJob& job, size_t count, bool inplace, Table& t, std::string& row_algo) {
  const AllreduceArgs& a = b.s.a;
  const char* algo = "";
  const Measured m = measure(b, job, count, inplace, algo);
  const std::string key = b.coll.name + "/point/" + std::to_string(t.point++) + "/";
  job.store->set(key + std::to_string(job.rank), pack(m));
  if (job.rank != 0) {
    t.total_wrong += m.wrong;
    return {};
  }
  std::vector<Measured> all;
  for (int r = 0; r < job.n; ++r) {
    const std::string rank_key = key + std::to_string(r);
    all.push_back(unpack(get_from_rank(*job.store, rank_key, r, 2 * job.timeout), rank_key, r, a.iters, count));
  }
  const size_t es = b.s.es;
  const Row row = summarize(all, count * es, b.coll.busbw_factor(job.n));
  t.total_wrong += row.wrong;
  t.rows.push_back({{"bytes", count * es}, {"count", count}, {"dtype", dtype_name(b.s.dtype)},
                    {"op", op_shown(b.s)}, {"inplace", inplace}, {"algo", algo},
                    {"time_us", row.time_us}, {"p50_us", row.p50_us},
                    {"p99_us", row.p99_us}, {"algbw_gbps", row.algbw},
                    {"busbw_gbps", row.busbw}, {"cpu_us", row.cpu_us},
                    {"wrong", a.check ? json(row.wrong) : json(nullptr)}});
  t.busbw_sum += row.busbw;
  row_algo = algo;
  ++t.busbw_rows;
  return row;
}

void print_row(const Sweep& s, size_t count, const std::string& algo, const Row (&results)[2]) {
  auto wrong = [&](const Row& r) { return s.a.check ? std::to_string(r.wrong) : std::string("N/A"); };
  std::printf("%12zu %13zu %9s %6s %6s %10.1f %8.3f %8.3f %7s %10.1f %8.3f %8.3f %7s\n",
              count * s.es, count, dtype_name(s.dtype), op_shown(s), algo.c_str(),
              results[0].time_us, results[0].algbw,
              results[0].busbw, wrong(results[0]).c_str(), results[1].time_us,
              results[1].algbw, results[1].busbw, wrong(results[1]).c_str());
  std::fflush(stdout);
}

void print_footer(const Sweep& s, const Table& t) {
  std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(t.total_wrong),
              !s.a.check ? "(not checked: -c 0)" : t.total_wrong ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %.3f GB/s\n#\n", t.busbw_rows ? t.busbw_sum / t.busbw_rows : 0.0);
  std::fflush(stdout);
}

// The size after `bytes`: `factor` times larger, at least one element more, at most maxb.
size_t next_size(const Sweep& s, size_t bytes) {
  size_t next = static_cast<size_t>(std::ceil(static_cast<double>(bytes) * s.a.factor));
  return std::min(s.maxb, std::max(next, bytes + s.es));  // from 0, the next size is 1 element
}

}  // namespace

int run_collective_sweep(const AllreduceArgs& a, const std::vector<std::string>& argv) {
  const Sweep s = parse_sweep(a);
  const Backend& backend = chosen_backend(a);
  const Collective& coll = *a.collective;
  const Millis timeout(static_cast<long>(a.timeout_s * 1000));
  RankJob job = start_rank_job({coll.name, a.ranks, a.addr, a.iface, a.secret_file, timeout, a.json,
                                backend.gpu_buffers ? "--impl " + backend.name : "", backend.needs_mpirun},
                               argv);
  if (job.launched) return *job.launched;

  json meta;
  Table t;
  try {
    // Every rank checks every rank, so all of them stop with the same message.
    const std::optional<AlgoTableEntry> table = table_entry(a, backend.name, job.n);
    const AlgoTableEntry* entry = table ? &*table : nullptr;
    job.check_same_options(sweep_shape(s, entry), "run the same sweep");
    const size_t max_count = s.maxb / s.es;
    AlignedBuffer in(max_count * s.es), out(max_count * s.es);
    if (backend.gpu_buffers) use_local_gpu(*job.world);
    auto comm = backend.make({*job.store, job.rank, job.n, *job.world, timeout, net_args(a), coll.name});
    const json path = path_json(*comm);
    const PlanArgs plan{in.data, out.data, max_count, s.dtype, s.op, allreduce_options(a, timeout, entry)};
    const std::unique_ptr<CollectivePlan> impl = coll.native ? coll.native(*comm, plan) : comm->plan(coll, plan);
    const json hosts = job.exchange_hosts(job.host_record(path, gpu_json()), false);
    if (job.rank == 0) {
      meta = sweep_meta(job, s, backend, coll, argv, hosts, entry);
      print_header(job, s, backend, hosts, entry);
      job.write_json({{"meta", meta}, {"rows", t.rows}});
    }

    const Bench bench{s, coll, *impl, in.data, out.data};
    for (size_t bytes = s.minb;; bytes = next_size(s, bytes)) {
      const size_t count = coll.round_count(bytes / s.es, job.n);
      std::string row_algo;
      const Row results[2] = {run_point(bench, job, count, false, t, row_algo),
                              run_point(bench, job, count, true, t, row_algo)};
      if (job.rank == 0) {
        print_row(s, count, row_algo, results);
        job.write_json({{"meta", meta}, {"rows", t.rows}});
      }
      if (bytes >= s.maxb) break;
    }
    if (job.rank == 0) print_footer(s, t);
  } catch (const std::exception& e) {
    return job.fail(e, {{"meta", meta}, {"rows", t.rows}}, e.what());
  }
  if (t.total_wrong) std::cerr << job.tag + std::to_string(t.total_wrong) + " wrong elements\n";
  return t.total_wrong ? 2 : 0;
}

}  // namespace ringbench
