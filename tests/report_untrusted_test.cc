// A results directory is untrusted input (issue 38): raw.jsonl's records are checked field by
// field before anything reads them, nothing a record carries reaches a gnuplot script as code,
// and raw.jsonl itself must be a regular file of a sane size.
#include <sys/stat.h>

#include <chrono>
#include <functional>
#include <utility>

#include "runner/analysis/plots.h"
#include "tests/report_fixture.h"

namespace ringbench::report_testing {
namespace {

using report::add_series;
using report::gp_quote;
using report::Plot;
using report::Plotter;

// What gnuplot would run if a name could end its string: a new line with a shell command.
std::string hostile(const std::string& marker) {
  return "x'\nsystem \"touch " + marker + "\"\nset title '";
}

// The Error that reporting `jsonl` throws ("" when it reports).
std::string report_error(const std::string& jsonl) {
  TempDir dir;
  try {
    write_report(make_run(dir, jsonl), no_plots());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string one_record(const json& rec) { return standard_sweep().jsonl() + rec.dump() + "\n"; }

json share_record() {
  json r = standard_sweep().records[0];
  r.update({{"kind", "share"}, {"point", "share/lenet/b32/T4-4C/best_effort/vms1"}, {"profile", "T4-4C"},
            {"policy", "best_effort"}, {"vms", 1}, {"status", "skipped"}});
  r.erase("train");
  return r;
}

json migrate_record() {
  json r = standard_sweep().records[0];
  r.update({{"kind", "migrate"}, {"point", "migrate/lenet/b32/n2/tcp/precopy"}, {"nodes", 2}, {"transport", "tcp"},
            {"method", "precopy"}, {"framebuffer", "1G"}, {"status", "skipped"}});
  r.erase("train");
  return r;
}

// Every field that reaches a plot's title, key, axis or data, given a hostile value: the record
// is an error naming its line (the standard sweep has 19) and the field, and nothing ran.
TEST(ReportUntrusted, HostileNamesInEveryPlottedFieldAreRefusedByLineAndField) {
  TempDir scratch;
  const std::string marker = scratch.path() + "/PWNED";
  const std::vector<std::pair<const char*, json>> cases = {
      {"model", standard_sweep().records[3]},  {"transport", standard_sweep().records[3]},
      {"profile", standard_sweep().records[3]}, {"point", standard_sweep().records[3]},
      {"kind", standard_sweep().records[3]},   {"policy", share_record()},
      {"profile", share_record()},             {"method", migrate_record()},
      {"framebuffer", migrate_record()}};
  for (auto [field, rec] : cases) {
    ASSERT_EQ(report_error(one_record(rec)), "") << field;  // the record as it was is fine
    rec[field] = hostile(marker);
    const std::string err = report_error(one_record(rec));
    EXPECT_TRUE(has_all(err, {"raw.jsonl line 20", std::string("\"") + field + "\""})) << field << ": " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << "the error echoes the name's lines: " << err;
  }
  EXPECT_FALSE(fs::exists(marker));
}

// The other end: whatever a title holds, gnuplot draws it and runs none of it.
TEST(ReportUntrusted, GnuplotRunsNothingATitleCarries) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  TempDir dir;
  const std::string marker = dir.path() + "/PWNED";
  for (const std::string& evil : std::vector<std::string>{hostile(marker), "a\r\nsystem 'touch " + marker + "'",
                                                          "`touch " + marker + "`", "@x", "back\\slash'"})
    EXPECT_EQ(gp_quote(evil).find_first_of("\r\n"), std::string::npos) << evil;
  Plotter plotter(dir.path(), true);
  ASSERT_TRUE(plotter.enabled()) << plotter.note();
  Plot p{"evil", hostile(marker), "x", "y", "", "", ""};
  add_series(p, {{hostile(marker), {{1, 2, 0.1}, {2, 3, 0.1}}}, {"`touch " + marker + "`", {{1, 1, 0}}}},
             "yerrorlines");
  plotter.render(p);
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_NE(read_file(dir.path() + "/plots/evil.svg").find("<svg"), std::string::npos);
}

// Numbers, types and names, one field at a time: each bad record is an error naming its line
// and field (before: a report with rows like "| -2 | tcp |", exit 0).
TEST(ReportUntrusted, EveryRecordIsCheckedFieldByField) {
  using Edit = std::function<void(json&)>;
  const std::vector<std::tuple<const char*, Edit, const char*>> cases = {
      {"nodes -2", [](json& r) { r["nodes"] = -2; }, "\"nodes\": -2 is out of range"},
      {"nodes a string", [](json& r) { r["nodes"] = "2"; }, "\"nodes\" is missing or not an integer"},
      {"nodes 1e6", [](json& r) { r["nodes"] = 1000000; }, "\"nodes\": 1000000 is out of range"},
      {"schema 99", [](json& r) { r["schema"] = 99; }, "\"schema\": '99' is not the one this ringbench reads (1)"},
      {"unknown kind", [](json& r) { r["kind"] = "bogus"; }, "\"kind\": 'bogus' is none of"},
      {"unknown model", [](json& r) { r["model"] = "resnet9000"; }, "\"model\": 'resnet9000' is not a model"},
      {"unknown transport", [](json& r) { r["transport"] = "carrier-pigeon"; }, "\"transport\": 'carrier-pigeon'"},
      {"batch 0", [](json& r) { r["batch"] = 0; }, "\"batch\": 0 is out of range"},
      {"batch a string", [](json& r) { r["batch"] = "32"; }, "\"batch\" is missing or not an integer"},
      {"image_size -1", [](json& r) { r["image_size"] = -1; }, "\"image_size\": -1 is out of range"},
      {"repeat 0", [](json& r) { r["repeat"] = 0; }, "\"repeat\": 0 is out of range"},
      {"seq a string", [](json& r) { r["seq"] = "7"; }, "\"seq\": '\"7\"' is not"},
      {"status", [](json& r) { r["status"] = "great"; }, "\"status\": 'great' is none of"},
      {"precision", [](json& r) { r["precision"] = "fp64"; }, "\"precision\": 'fp64' is not one of"},
      {"img/s a string", [](json& r) { r["train"]["summary"]["total_img_s"]["mean"] = "fast"; },
       "\"train/summary/total_img_s/mean\": '\"fast\"' is not a number"},
      {"negative time", [](json& r) { r["train"]["summary"]["exposed_s"]["mean_over_ranks"] = -0.5; },
       "\"train/summary/exposed_s/mean_over_ranks\": -0.5 is negative"},
      {"negative step in a rank's series", [](json& r) { r["train"]["ranks"][1]["step_s"][2] = -1; },
       "\"train/ranks/1/step_s/2\": -1 is negative"},
      {"negative wall time", [](json& r) { r["wall_s"] = -3; }, "\"wall_s\": -3 is negative"},
  };
  for (const auto& [what, edit, expected] : cases) {
    json rec = standard_sweep().records[3];  // lenet N=2 over tcp, repeat 1
    edit(rec);
    const std::string err = report_error(one_record(rec));
    EXPECT_TRUE(has_all(err, {"raw.jsonl line 20: ", expected})) << what << ": " << err;
  }
  json rows = standard_sweep().records.back();  // collectives
  rows["collectives"]["rows"][0]["busbw_gbps"] = -1.0;
  EXPECT_TRUE(has_all(report_error(one_record(rows)), {"line 20", "\"collectives/rows/0/busbw_gbps\": -1"}));
}

TEST(ReportUntrusted, RawJsonlThatIsNotARegularFileIsRefusedAtOnce) {
  TempDir fifo, zero;
  ASSERT_EQ(mkfifo((fifo.path() + "/raw.jsonl").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", zero.path() + "/raw.jsonl");
  for (const auto& [dir, kind] : {std::pair{fifo.path(), "is a FIFO"}, {zero.path(), "is a character device"}}) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      write_report(dir, no_plots());
      ADD_FAILURE() << dir << ": no error";
    } catch (const Error& e) {
      EXPECT_TRUE(has_all(e.what(), {"raw.jsonl", kind, "only a regular file"})) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));  // a hang would be forever
  }
}

// The report writes its own files in a directory that may come from anyone: never through a
// symbolic link planted there (before: summary.csv -> a file elsewhere was overwritten).
TEST(ReportUntrusted, OutputsAreNeverWrittenThroughALinkInTheRunDirectory) {
  TempDir elsewhere;
  const std::string victim = elsewhere.path() + "/victim";
  write_file(victim, "precious\n");
  for (const char* own : {"summary.csv", "report.md"}) {
    TempDir dir;
    fs::create_symlink(victim, dir.path() + "/" + own);
    try {
      write_report(make_run(dir, standard_sweep().jsonl()), no_plots());
      ADD_FAILURE() << own << ": no error";
    } catch (const Error& e) {
      EXPECT_TRUE(has_all(e.what(), {own, "is a symbolic link"})) << e.what();
    }
    EXPECT_EQ(read_file(victim), "precious\n") << own;
  }
  TempDir dir;
  fs::create_directory_symlink(elsewhere.path(), dir.path() + "/plots");
  EXPECT_THROW(write_report(make_run(dir, standard_sweep().jsonl())), Error);
  EXPECT_EQ(fs::directory_iterator(elsewhere.path())->path(), victim);  // nothing written beside it
  EXPECT_FALSE(fs::exists(dir.path() + "/report.md"));
}

}  // namespace
}  // namespace ringbench::report_testing
