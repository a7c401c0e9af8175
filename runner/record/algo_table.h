// The allreduce's cost table: which algorithm `allreduce --algo auto --algo-table FILE` runs for
// each (transport, N, message size). `ringbench predict RUN_DIR --algo-table FILE` writes it
// from the α-β it fitted to the run's measured allreduces, per algorithm and N (NCCL's tuner
// idea, fed by measurement). A file, JSON (docs/collectives.md#cost-table):
//   {"format": "ringbench-algo-table", "version": 1, "source": "...",
//    "entries": [{"transport": "tcp", "nodes": 4,
//                 "fits": [{"algo": "ring", "alpha_s": 5e-05, "beta_s_per_byte": 1e-09,
//                           "min_bytes": 65536, "max_bytes": 67108864, "r2": 0.99}, ...],
//                 "ranges": [{"from_bytes": 0, "to_bytes": 32767, "algo": "rd", "basis": "measured",
//                             "predicted_s": {"rd": [t_from, t_to], "ring": [...]}}, ...,
//                            {"from_bytes": 8388608, "to_bytes": null, ...}]}]}
// Ranges tile [0, ∞): each starts one byte above the last, the last is open (to_bytes null).
// Only an algorithm fitted at that N can be chosen; `basis` says whether the range lies within
// the sizes its fit measured ("measured") or the algorithm is the nearest measured one
// ("nearest measured": no algorithm was measured at these sizes).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringbench {

constexpr int kAlgoTableVersion = 1;
constexpr const char* kAlgoTableFormat = "ringbench-algo-table";

struct AlgoTableFit {
  std::string algo;  // ring, direct, rd, hd
  double alpha_s = 0, beta_s_per_byte = 0;
  double min_bytes = 0, max_bytes = 0;  // the sizes it was fitted on
  double r2 = 0;
};

struct AlgoTableRange {
  size_t from_bytes = 0;
  std::optional<size_t> to_bytes;  // inclusive; none: open-ended (the last range)
  std::string algo;
  std::string basis;  // "measured" or "nearest measured"
  // Every fitted algorithm's predicted time at from_bytes and at to_bytes (none for the last).
  std::map<std::string, std::pair<double, std::optional<double>>> predicted_s;
};

struct AlgoTableEntry {
  std::string transport;  // the ring's transport: tcp, shm, verbs
  int nodes = 0;          // N ranks
  std::vector<AlgoTableFit> fits;
  std::vector<AlgoTableRange> ranges;
};

struct AlgoTable {
  std::string source;  // what it was written from ("ringbench predict RUN_DIR, run ID")
  std::vector<AlgoTableEntry> entries;
};

// Every value checked; Error naming `file` and the field ("entries[0].ranges[2].algo") otherwise.
AlgoTable parse_algo_table(const std::string& text, const std::string& file);
AlgoTable read_algo_table(const std::string& path);  // the file (regular, bounded), parsed
std::string algo_table_json(const AlgoTable& t);    // what parse_algo_table reads back

// The entry for (transport, nodes), or null.
const AlgoTableEntry* find_entry(const AlgoTable& t, const std::string& transport, int nodes);

// "rd < 32 KiB, hd < 8 MiB, ring >= 8 MiB" (sizes rounded to 4 digits; the file has the bytes).
std::string ranges_text(const AlgoTableEntry& e);

}  // namespace ringbench
