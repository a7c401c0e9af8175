// The allreduce cost table: `predict --algo-table` chooses from synthetic fits the algorithm the
// α-β formulas say is fastest, per size, and never one not measured at that N; the file reads
// back the same, and a bad one is an Error naming the file and the field; `allreduce --algo auto
// --algo-table FILE` runs at each size the algorithm the table names, exact, and says so.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "base/errors.h"
#include "runner/predict/algo_choice.h"
#include "runner/record/algo_table.h"
#include "tests/run_command.h"

namespace ringbench {
namespace {

using predict::CostFit;
using predict::TransportFit;
using testing::has_all;
using testing::run_command;
using testing::run_json;
using testing::temp_path;

TransportFit fit(const std::string& algo, int nodes, double alpha, double beta, double min_b, double max_b) {
  CostFit f;
  f.algo = algo, f.alpha_s = alpha, f.beta_s = beta, f.min_bytes = min_b, f.max_bytes = max_b, f.r2 = 0.99;
  return {"tcp", nodes, f};
}

// The textbook times (Thakur, Rabenseifner and Gropp), written out here, not taken from cost_fit.
double textbook_s(const std::string& algo, int n, double alpha, double beta, double b) {
  if (algo == "ring") return 2 * (n - 1) * alpha + 2.0 * (n - 1) / n * b * beta;
  if (algo == "hd") return 2 * std::log2(n) * alpha + 2.0 * (n - 1) / n * b * beta;
  if (algo == "direct") return alpha + (n - 1) * b * beta;
  return std::log2(n) * (alpha + b * beta);  // rd
}

const AlgoTableRange& range_at(const AlgoTableEntry& e, size_t bytes) {
  for (const auto& r : e.ranges)
    if (bytes >= r.from_bytes && (!r.to_bytes || bytes <= *r.to_bytes)) return r;
  throw Error("no range holds " + std::to_string(bytes));
}

TEST(AlgoChoice, PicksTheKnownBestPerSize) {
  // N=4, every algorithm measured from 1 KiB to 64 MiB: rd (few, fat messages) wins small, hd
  // (ring's bytes, fewer messages) in the middle, and the ring (the cheapest bytes here) large.
  struct A { const char* algo; double alpha, beta; };
  // t(B) at N=4: direct 15 us + 3 B ns, rd 20 us + 2 B ns, hd 40 us + 0.9 B ns, ring 72 us + 0.75 B ns:
  // direct below 5000 B, rd to 18.2 KB, hd to 213 KB, the ring above.
  const A algos[] = {{"rd", 10e-6, 1.0e-9}, {"direct", 15e-6, 1.0e-9}, {"hd", 10e-6, 0.60e-9}, {"ring", 12e-6, 0.5e-9}};
  std::vector<TransportFit> fits;
  for (const A& a : algos) fits.push_back(fit(a.algo, 4, a.alpha, a.beta, 1024, 64 << 20));
  const AlgoTable t = predict::choose_algorithms(fits, "synthetic");
  ASSERT_EQ(t.entries.size(), 1u);
  const AlgoTableEntry& e = t.entries[0];
  EXPECT_EQ(e.nodes, 4);
  std::set<std::string> chosen;
  for (size_t b = 1024; b <= (64u << 20); b = b * 3 / 2) {
    std::string best;
    double best_s = INFINITY;
    for (const A& a : algos)
      if (const double s = textbook_s(a.algo, 4, a.alpha, a.beta, double(b)); s < best_s) best_s = s, best = a.algo;
    EXPECT_EQ(range_at(e, b).algo, best) << b << " B";
    EXPECT_EQ(range_at(e, b).basis, "measured") << b << " B";
    chosen.insert(best);
  }
  EXPECT_EQ(chosen, (std::set<std::string>{"direct", "rd", "hd", "ring"}));  // three crossovers
  // Each boundary is the crossover to the byte: the range's algorithm is no slower at its last
  // byte, the next one's is faster one byte on.
  for (size_t i = 0; i + 1 < e.ranges.size(); ++i) {
    const size_t last = *e.ranges[i].to_bytes;
    if (last < 1024 || e.ranges[i].algo == e.ranges[i + 1].algo) continue;  // not a crossover
    auto time = [&](const std::string& algo, size_t b) {
      for (const A& a : algos)
        if (a.algo == algo) return textbook_s(algo, 4, a.alpha, a.beta, double(b));
      return double(INFINITY);
    };
    EXPECT_LE(time(e.ranges[i].algo, last), time(e.ranges[i + 1].algo, last) * (1 + 1e-12)) << last;
    EXPECT_LT(time(e.ranges[i + 1].algo, last + 1), time(e.ranges[i].algo, last + 1)) << last;
  }
  EXPECT_NEAR(range_at(e, 1 << 20).predicted_s.at("ring").first,
              textbook_s("ring", 4, 12e-6, 0.5e-9, double(range_at(e, 1 << 20).from_bytes)), 1e-15);
}

TEST(AlgoChoice, NeverChoosesAnAlgorithmNotMeasuredThere) {
  std::vector<TransportFit> fits = {
      fit("ring", 2, 50e-6, 1e-9, 64 << 10, 64 << 20),  // N=2: the ring alone, from 64 KiB
      fit("direct", 2, 5e-6, 1e-9, 1024, 32 << 10),     // and direct up to 32 KiB
      fit("hd", 4, 1e-9, 1e-12, 1024, 64 << 20),        // hd measured (and absurdly fast) at N=4 only
  };
  fits.push_back(fits[2]);
  fits.back().nodes = 0;  // a fit over every N is no measurement at N=2
  const AlgoTable t = predict::choose_algorithms(fits, "synthetic");
  ASSERT_EQ(t.entries.size(), 2u);
  const AlgoTableEntry& n2 = *find_entry(t, "tcp", 2);
  for (const auto& r : n2.ranges) EXPECT_NE(r.algo, "hd");
  EXPECT_EQ(range_at(n2, 4096).algo, "direct");
  EXPECT_EQ(range_at(n2, 4096).basis, "measured");
  EXPECT_EQ(range_at(n2, 1 << 20).algo, "ring");
  EXPECT_EQ(range_at(n2, 1 << 30).basis, "nearest measured");  // beyond 64 MiB: no measurement
  EXPECT_EQ(range_at(n2, 1 << 30).algo, "ring");
  // Between 32 and 64 KiB neither was measured: the nearer measured one runs, and says so.
  EXPECT_EQ(range_at(n2, 40 << 10).algo, "direct");
  EXPECT_EQ(range_at(n2, 40 << 10).basis, "nearest measured");
  EXPECT_EQ(range_at(n2, 56 << 10).algo, "ring");
  const std::string md = predict::md_algo_table(t);
  EXPECT_TRUE(has_all(md, {"tcp N=2: direct < ", "not measured at this N, never chosen: hd, rd"})) << md;
}

const std::string kGood = R"({"format": "ringbench-algo-table", "version": 1, "source": "test",
 "entries": [{"transport": "tcp", "nodes": 4,
   "fits": [{"algo": "rd", "alpha_s": 2e-05, "beta_s_per_byte": 2e-09, "min_bytes": 1024, "max_bytes": 32768, "r2": 0.98},
            {"algo": "direct", "alpha_s": 2e-05, "beta_s_per_byte": 2e-09, "min_bytes": 1024, "max_bytes": 32768, "r2": 0.98},
            {"algo": "hd", "alpha_s": 2e-05, "beta_s_per_byte": 2e-09, "min_bytes": 1024, "max_bytes": 1048576, "r2": 0.98},
            {"algo": "ring", "alpha_s": 3e-05, "beta_s_per_byte": 1e-09, "min_bytes": 1024, "max_bytes": 67108864, "r2": 0.99}],
   "ranges": [{"from_bytes": 0, "to_bytes": 4095, "algo": "rd", "basis": "measured", "predicted_s": {"rd": [4e-05, 5e-05]}},
              {"from_bytes": 4096, "to_bytes": 16383, "algo": "direct", "basis": "measured", "predicted_s": {"direct": [4e-05, 5e-05]}},
              {"from_bytes": 16384, "to_bytes": 262143, "algo": "hd", "basis": "measured", "predicted_s": {"hd": [4e-05, 5e-05]}},
              {"from_bytes": 262144, "to_bytes": null, "algo": "ring", "basis": "measured", "predicted_s": {"ring": [0.0003, null]}}]}]})";

TEST(AlgoTable, ReadsBackWhatItWrites) {
  const AlgoTable t = parse_algo_table(kGood, "good.json");
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].ranges.size(), 4u);
  EXPECT_EQ(*t.entries[0].ranges[2].to_bytes, 262143u);
  EXPECT_EQ(ranges_text(t.entries[0]), "rd < 4 KiB, direct < 16 KiB, hd < 256 KiB, ring >= 256 KiB");
  const std::string text = algo_table_json(t);
  EXPECT_EQ(algo_table_json(parse_algo_table(text, "again.json")), text);
}

TEST(AlgoTable, ABadTableNamesTheFileAndTheField) {
  struct Case { std::string from, to, says; };
  const Case cases[] = {
      {"\"version\": 1", "\"version\": 2", "bad.json: version: version 2 is not the one this ringbench reads (1)"},
      {"ringbench-algo-table", "other", "bad.json: format: must be \"ringbench-algo-table\""},
      {"\"nodes\": 4", "\"nodes\": 1", "bad.json: entries[0].nodes: must be a number from 2"},
      {"\"from_bytes\": 4096", "\"from_bytes\": 4000", "entries[0].ranges[1].from_bytes: must be 4096"},
      {"\"algo\": \"hd\", \"basis\"", "\"algo\": \"bogus\", \"basis\"", "entries[0].ranges[2].algo: 'bogus' is not one of: ring, direct, rd, hd"},
      {"\"to_bytes\": null", "\"to_bytes\": 999999999", "entries[0].ranges[3].to_bytes: must be null"},
      {"\"to_bytes\": 4095", "\"to_bytes\": null", "entries[0].ranges[0].to_bytes: must be a byte count"},
      {"\"alpha_s\": 3e-05", "\"alpha_s\": -1", "entries[0].fits[3].alpha_s: must be a number from 0"},
      {"\"basis\": \"measured\", \"predicted_s\": {\"ring\"", "\"basis\": \"guessed\", \"predicted_s\": {\"ring\"", "entries[0].ranges[3].basis"},
      {"\"source\": \"test\",", "\"source\": \"test\", \"extra\": 1,", "bad.json: unknown key 'extra'"},
      {"{\"rd\": [4e-05, 5e-05]}", "{\"rd\": [4e-05]}", "entries[0].ranges[0].predicted_s.rd: must be [time at from_bytes"},
      {"\"transport\": \"tcp\"", "\"transport\": \"t c p\"", "entries[0].transport: 't c p' is not a transport name"},
      {"\"nodes\": 4", "\"nodes\": 3", "entries[0].fits[0].algo: rd needs a power-of-two N, not 3"},
      {"]}]}", "]}", "bad.json: not JSON"},
  };
  for (const Case& c : cases) {
    std::string text = kGood;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    try {
      parse_algo_table(text, "bad.json");
      ADD_FAILURE() << "accepted: " << c.to;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
  // A second entry for the same transport and N: which one would auto follow?
  std::string twice = kGood;
  const size_t entry = twice.find("{\"transport\"");
  const std::string one = twice.substr(entry, twice.rfind("]}") - entry);  // the entry, whole
  twice.insert(entry, one + ", ");
  EXPECT_THROW(
      try { parse_algo_table(twice, "t.json"); } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("entries[1]: a second entry for tcp N=4"), std::string::npos) << e.what();
        throw;
      },
      Error);
  // An algorithm with no fit at that N cannot be chosen.
  std::string unfitted = kGood;
  const size_t hd_fit = unfitted.find("{\"algo\": \"hd\", \"alpha_s\"");
  unfitted.erase(hd_fit, unfitted.find('}', hd_fit) + 2 - hd_fit);
  EXPECT_THROW(
      try { parse_algo_table(unfitted, "u.json"); } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("ranges[2].algo: hd has no fit at this N"), std::string::npos) << e.what();
        throw;
      },
      Error);
}

std::string write_table(const std::string& text) {
  const std::string path = temp_path("table") + ".json";
  std::ofstream(path) << text;
  return path;
}

const std::string kBin = RINGBENCH_BIN;

TEST(AlgoAutoCli, FollowsTheTableSizeBySize) {
  const std::string table = write_table(kGood);
  auto [code, output, doc] = run_json(kBin + " allreduce --ranks 4 --algo auto --algo-table " + table +
                                      " -b 1K -e 1M -f 4 -n 1 -w 0 --timeout 20");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# algorithm per row: auto from the cost table " + table +
                                   " (tcp N=4): rd < 4 KiB, direct < 16 KiB, hd < 256 KiB, ring >= 256 KiB",
                               "# Out of bounds values : 0 OK"}))
      << output;
  EXPECT_EQ(doc["meta"]["options"]["algo_table"], table);
  const std::map<size_t, std::string> expect = {
      {1024, "rd"}, {4096, "direct"}, {16384, "hd"}, {65536, "hd"}, {262144, "ring"}, {1 << 20, "ring"}};
  ASSERT_EQ(doc["rows"].size(), 2 * expect.size());
  for (auto& row : doc["rows"]) {
    EXPECT_EQ(row["wrong"], 0) << row;
    EXPECT_EQ(row["algo"], expect.at(row["bytes"].get<size_t>())) << row;
  }
}

TEST(AlgoAutoCli, WithoutATableTheBuiltInRuleIsNamed) {
  auto [code, output, doc] = run_json(kBin + " allreduce --ranks 2 -b 16K -e 64K -f 4 -n 1 -w 0 --timeout 20");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# algorithm per row: auto, built-in rule (no --algo-table): direct (one-shot) up to 32768 B, ring above"}))
      << output;
  EXPECT_EQ(doc["rows"][0]["algo"], "direct");
  EXPECT_EQ(doc["rows"][2]["algo"], "ring");
}

TEST(AlgoAutoCli, ATableThatDoesNotFitIsAClearError) {
  const std::string good = write_table(kGood);
  auto r = run_command(kBin + " allreduce --ranks 2 --algo-table " + good + " -e 64K --timeout 10");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"--algo-table " + good + ": no entry for tcp N=2 (it has tcp N=4)"})) << r.output;
  r = run_command(kBin + " allreduce --ranks 2 --algo ring --algo-table " + good + " -e 64K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"--algo-table chooses for --algo auto, not --algo ring"})) << r.output;
  std::string broken = kGood;
  broken.replace(broken.find("\"r2\": 0.99"), 10, "\"r2\": \"high\"");
  const std::string bad = write_table(broken);
  r = run_command(kBin + " allreduce --ranks 2 --algo-table " + bad + " -e 64K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {bad + ": entries[0].fits[3].r2: must be a number"})) << r.output;
  r = run_command(kBin + " allreduce --ranks 2 --algo-table /nonexistent/t.json -e 64K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"/nonexistent/t.json"})) << r.output;
}

}  // namespace
}  // namespace ringbench
