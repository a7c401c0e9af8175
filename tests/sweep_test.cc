// End-to-end tests of `ringbench sweep`, `report` and `compare` with the real binary: points on
// loopback, a failed point that does not stop the sweep, skipped transports, Ctrl-C and
// --resume, the emulated cluster (as root), the sweep under mpirun, and tiny infer and migrate
// sweeps.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "runner/cluster/cluster.h"
#include "tests/run_command.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
using namespace testing;  // tests/run_command.h
namespace fs = std::filesystem;
const std::string kBin = RINGBENCH_BIN;

const std::string kLenet = R"(
train:
  models: [{model: lenet, batch: 8}]
  warmup: 1
  steps: 3
)";

class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_path("run"); }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string dir_;
};

// --dry-run lists every point in the order a sweep runs them (repeats outermost), says which
// would be skipped and why, and runs and writes nothing.
TEST_F(SweepTest, DryRunListsThePointsAndRunsNothing) {
  const std::string cfg = write_config("name: dry\nnodes: [1, 2]\ntransports: [tcp]\nrepeats: 2\n"
                                       "cluster: {type: local}\n" + kLenet);
  auto r = run_command(kBin + " sweep " + cfg + " --dry-run --out " + dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> points;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string id, repeat;
    words >> id >> repeat;
    points.push_back(id + " " + repeat);
  }
  EXPECT_EQ(points, (std::vector<std::string>{"train/lenet/b8/n1/none/none r1", "train/lenet/b8/n2/tcp/none r1",
                                              "train/lenet/b8/n1/none/none r2", "train/lenet/b8/n2/tcp/none r2"}))
      << r.output;
  EXPECT_FALSE(fs::exists(dir_)) << "a dry run made its results directory";
}

TEST_F(SweepTest, TwoPointsOnLoopbackEndToEnd) {
  const std::string cfg = write_config("name: e2e\nnodes: [1, 2]\ntransports: [tcp, verbs]\nrepeats: 1\n"
                                       "cluster: {type: local}\n" + kLenet);
  auto r = run_command(kBin + " sweep " + cfg + " --out " + dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[2/3] train/lenet/b8/n2/tcp/none r1: ok"), std::string::npos) << r.output;
  for (const char* f : {"config.yaml", "env.json", "raw.jsonl", "summary.csv", "report.md"})
    EXPECT_TRUE(fs::exists(dir_ + "/" + f)) << f;
  EXPECT_FALSE(fs::exists(dir_ + "/tmp"));
  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_EQ(raw[0]["point"], "train/lenet/b8/n1/none/none");
  EXPECT_EQ(raw[1]["point"], "train/lenet/b8/n2/tcp/none");
  for (int i : {0, 1}) {
    EXPECT_EQ(raw[i]["status"], "ok") << raw[i].dump();
    EXPECT_EQ(raw[i]["train"]["ranks"].size(), size_t(raw[i]["nodes"].get<int>()));
    EXPECT_GT(raw[i]["train"]["summary"]["total_img_s"]["mean"].get<double>(), 0);
    EXPECT_EQ(raw[i]["cluster"]["type"], "local");
  }
  EXPECT_EQ(raw[1]["train"]["meta"]["hosts"][0]["path"]["transport"], "tcp");
  EXPECT_EQ(raw[2]["status"], "skipped");
  EXPECT_NE(raw[2]["error"].get<std::string>().find("verbs"), std::string::npos);
  const json env = json::parse(read_text(dir_ + "/env.json"));
  for (const char* k : {"host", "build", "gpu", "vgpu", "rdma_core", "environment", "cluster", "run_id"})
    EXPECT_TRUE(env.contains(k)) << k;

  // The report comes from raw.jsonl alone: regenerating it gives the same bytes.
  EXPECT_TRUE(testing::report_regenerates(kBin, dir_));

  auto cmp = run_command(kBin + " compare " + dir_ + " " + dir_ + " --fail-on-regression");
  EXPECT_EQ(cmp.exit_code, 0) << cmp.output;
}

// A transport added by one backend file (shm) is a sweep transport like any other: its points
// run over it, and the report compares it with tcp at the same N.
TEST_F(SweepTest, ShmPointsRunAndAreComparedWithTcp) {
  const std::string cfg = write_config("name: shm\nnodes: [2]\ntransports: [tcp, shm]\nrepeats: 1\n"
                                       "cluster: {type: local}\n" + kLenet);
  auto r = run_command(kBin + " sweep " + cfg + " --out " + dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[1]["point"], "train/lenet/b8/n2/shm/none");
  ASSERT_EQ(raw[1]["status"], "ok") << raw[1].dump();
  for (const auto& h : raw[1]["train"]["meta"]["hosts"]) EXPECT_EQ(h["path"]["transport"], "shm");
  const std::string report = read_text(dir_ + "/report.md");
  EXPECT_NE(report.find("### shm vs tcp"), std::string::npos) << report;
}

// The collectives' `ops` axis end to end (issue 44): two ops at N=2 on loopback, each point
// running its own command, its rows in raw.jsonl with the op, and a table and busbw plot per op.
TEST_F(SweepTest, EachCollectiveOfOpsGetsItsRowsAndReportSection) {
  const std::string cfg = write_config("name: ops\nnodes: [2]\ntransports: [tcp]\nrepeats: 1\n"
                                       "cluster: {type: local}\n"
                                       "collectives: {min_bytes: 4K, max_bytes: 16K, iters: 2, warmup_iters: 1, "
                                       "ops: [allreduce, reducescatter]}\n");
  auto r = run_command(kBin + " sweep " + cfg + " --out " + dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 2u);
  const std::vector<std::string> ops = {"allreduce", "reducescatter"};
  for (int i : {0, 1}) {
    ASSERT_EQ(raw[i]["status"], "ok") << raw[i].dump();
    EXPECT_EQ(raw[i]["collective"], ops[i]);
    EXPECT_EQ(raw[i]["collectives"]["meta"]["collective"], ops[i]) << "the point ran another command";
    EXPECT_EQ(raw[i]["collectives"]["rows"].size(), 4u);  // 4K, 16K, out-of-place and in-place
    for (const auto& row : raw[i]["collectives"]["rows"]) {
      EXPECT_EQ(row["wrong"], 0) << row.dump();
      // busbw = algbw x 2(N-1)/N for allreduce, (N-1)/N for reduce-scatter (nccl-tests).
      EXPECT_NEAR(row["busbw_gbps"].get<double>() / row["algbw_gbps"].get<double>(), i == 0 ? 1.0 : 0.5, 1e-9);
    }
  }
  EXPECT_EQ(raw[0]["point"], "collectives/n2/tcp/none");
  EXPECT_EQ(raw[1]["point"], "collectives/reducescatter/n2/tcp/none");
  const std::string report = read_text(dir_ + "/report.md");
  EXPECT_NE(report.find("## Collectives (allreduce)"), std::string::npos) << report;
  const auto rs = report.find("## Collectives (reducescatter)");
  ASSERT_NE(rs, std::string::npos) << report;
  EXPECT_NE(report.find("### N=2, tcp (collectives/reducescatter/n2/tcp/none)", rs), std::string::npos) << report;
  EXPECT_NE(report.find("busbw = algbw × 0.500 at N=2", rs), std::string::npos) << report;
  if (report.find("Plots skipped") == std::string::npos) {
    EXPECT_TRUE(fs::exists(dir_ + "/plots/busbw.dat"));
    EXPECT_TRUE(fs::exists(dir_ + "/plots/busbw-reducescatter.dat"));
    EXPECT_NE(report.find("(plots/busbw-reducescatter.svg)"), std::string::npos) << report;
  }
  EXPECT_NE(read_text(dir_ + "/summary.csv").find(",collective\n"), std::string::npos);
  EXPECT_TRUE(testing::report_regenerates(kBin, dir_));
}

// Real data as an axis (issue 42): a jpeg point reads train.data_dir through its input pipeline,
// its record keeps the pipeline's means, and the report's "Where the time goes" shows them.
TEST_F(SweepTest, RealDataPointsCarryTheirInputPipelineIntoTheReport) {
  const std::string set = temp_path("sweep_set");
  auto made = run_command(kBin + " data make imagenet-like " + set + " --images 16 --classes 10 --shard-images 4");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string cfg = write_config(
      "name: real\nnodes: [2]\ntransports: [tcp]\nrepeats: 1\ncluster: {type: local}\ntrain:\n"
      "  models: [{model: mobilenet_v1, batch: 4, image_size: 32}]\n  warmup: 1\n  steps: 2\n"
      "  data: jpeg\n  data_dir: " + set + "\n");
  auto r = run_command(kBin + " sweep " + cfg + " --out " + dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0]["point"], "train/mobilenet_v1/b4/s32/data-jpeg/n2/tcp/none");
  ASSERT_EQ(raw[0]["status"], "ok") << raw[0].dump();
  const json& in = raw[0]["train"]["input"];
  EXPECT_TRUE(in["stall_s_per_step"]["mean_over_ranks"].is_number()) << raw[0].dump();
  EXPECT_GT(in["pipeline_cpus_per_rank"].get<double>(), 0) << raw[0].dump();
  EXPECT_EQ(in["config"]["threads"], 2);
  const std::string report = read_text(dir_ + "/report.md");
  EXPECT_NE(report.find("| input stall s | input CPUs |"), std::string::npos) << report;
  fs::remove_all(set);
}

// Profiles: a model over the framebuffer is recorded as "does not fit" (with the numbers) and
// the sweep goes on; sharing points run k VMs through `ringbench vgpu share`; the k-VM point of
// a profile that hosts fewer is skipped with the reason; the report has the vGPU section.
TEST_F(SweepTest, ProfilesAndSharingEndToEnd) {
  const std::string cfg = write_config(
      "name: vgpu\nnodes: [1]\nrepeats: 1\nprofiles: [P40-1Q]\n"
      "sharing: {vms_per_gpu: 2, policy: fixed_share, slice_ms: 5}\ncluster: {type: local}\n"
      "train:\n  models: [{model: lenet, batch: 8}, {model: inception_v3, batch: 64}]\n  warmup: 1\n  steps: 3\n");
  auto r = run_command("OMP_WAIT_POLICY=passive " + kBin + " sweep " + cfg + " --out " + dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, json> by_point;
  for (const auto& rec : read_raw(dir_)) by_point[rec["point"].get<std::string>()] = rec;
  const json& fits = by_point["train/lenet/b8/n1/none/P40-1Q"];
  EXPECT_EQ(fits["status"], "ok") << fits.dump();
  EXPECT_EQ(fits["train"]["meta"]["vgpu"]["mode"], "emulated");
  EXPECT_GT(fits["train"]["summary"]["device_memory"]["peak_mib"].get<double>(), 0);
  const json& big = by_point["train/inception_v3/b64/n1/none/P40-1Q"];
  EXPECT_EQ(big["status"], "does_not_fit") << big.dump();
  EXPECT_GT(big["does_not_fit"]["needed_at_least_mib"].get<double>(), 1024);
  const json& two = by_point["share/lenet/b8/P40-1Q/fixed_share/vms2"];
  ASSERT_EQ(two["status"], "ok") << two.dump();
  EXPECT_EQ(two["vms"], 2);
  EXPECT_EQ(two["policy"], "fixed_share");
  EXPECT_EQ(two["share"]["vms"].size(), 2u);
  EXPECT_EQ(two["share"]["meta"]["max_instances"], 24);
  const json& inc = by_point["share/inception_v3/b64/P40-1Q/fixed_share/vms2"];
  EXPECT_EQ(inc["status"], "does_not_fit") << inc.dump();
  EXPECT_EQ(by_point["share/lenet/b8/P40-1Q/fixed_share/vms1"]["status"], "ok");
  const std::string report = read_text(dir_ + "/report.md");
  EXPECT_NE(report.find("## vGPU profiles"), std::string::npos) << report;
  EXPECT_NE(report.find("does not fit"), std::string::npos) << report;
}

TEST_F(SweepTest, FailedPointIsRecordedAndTheSweepGoesOn) {
  // Every point needs far longer than the 2-second point timeout.
  const std::string cfg = write_config("name: slow\nnodes: [1, 2]\nrepeats: 1\ntimeout: 2\n"
                                       "cluster: {type: local}\ntrain:\n  models: [{model: lenet, batch: 8}]\n"
                                       "  steps: 100000\n");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_command(kBin + " sweep " + cfg + " --out " + dir_);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 2u) << r.output;
  for (const auto& rec : raw) {
    EXPECT_EQ(rec["status"], "failed");
    EXPECT_NE(rec["error"].get<std::string>().find("timed out after 2 s"), std::string::npos) << rec["error"];
  }
  EXPECT_NE(read_text(dir_ + "/report.md").find("timed out after 2 s"), std::string::npos);
}

TEST_F(SweepTest, InterruptThenResumeLosesNothing) {
  // 10 points: the Ctrl-C after the second leaves 8 to go, so a test thread that a loaded
  // machine keeps waiting still interrupts the sweep before its end.
  const std::string cfg = write_config("name: resume\nnodes: [1, 2]\nrepeats: 5\ncluster: {type: local}\n" + kLenet);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(kBin.c_str(), kBin.c_str(), "sweep", cfg.c_str(), "--out", dir_.c_str(), nullptr);
    _exit(127);
  }
  // Ctrl-C once two points are in.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline &&
         (!fs::exists(dir_ + "/raw.jsonl") || read_raw(dir_).size() < 2))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const auto before = read_raw(dir_);
  ASSERT_GE(before.size(), 2u);
  ASSERT_LT(before.size(), 10u);
  EXPECT_TRUE(fs::exists(dir_ + "/report.md"));  // a valid partial report

  auto r = run_command(kBin + " sweep --resume " + dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto after = read_raw(dir_);
  ASSERT_EQ(after.size(), 10u) << r.output;
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], before[i]);  // untouched
  std::set<std::string> seen;
  for (const auto& rec : after) {
    EXPECT_EQ(rec["status"], "ok");
    EXPECT_TRUE(seen.insert(rec["point"].get<std::string>() + "#" + std::to_string(rec["repeat"].get<int>())).second);
  }
}

// SIGTERM (or Ctrl-C) while the first point runs: nothing is measured yet, so there is no
// report to write; the sweep says so and exits 130 (before: "raw.jsonl not found", exit 1).
TEST_F(SweepTest, InterruptBeforeTheFirstPointEndsSaysNothingWasMeasured) {
  const std::string cfg = write_config("name: early\nnodes: [1]\ncluster: {type: local}\n"
                                       "train: {models: [{model: lenet, batch: 8}], warmup: 1, steps: 100000}\n");
  const std::string err_path = temp_path("early-stderr");
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(null, 1);
    dup2(err, 2);
    execl(kBin.c_str(), kBin.c_str(), "sweep", cfg.c_str(), "--out", dir_.c_str(), nullptr);
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && read_text(err_path).find("points (") == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the point's ranks are starting
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string err = read_text(err_path);
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_TRUE(has_all(err, {"interrupted before the first point finished: nothing measured yet",
                            "ringbench sweep --resume " + dir_}));
  EXPECT_EQ(err.find("not found"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ + "/raw.jsonl"));
  EXPECT_TRUE(fs::exists(dir_ + "/config.yaml"));  // --resume has what it needs
}

// A results directory may come from anyone: --resume refuses one whose own files or logs are
// symbolic links, before writing anything (before: raw.jsonl -> a file elsewhere was rewritten
// with the sweep's records, and a planted log link truncated its target).
TEST_F(SweepTest, ResumeNeverWritesThroughALinkInTheRunDirectory) {
  const std::string cfg = write_config("name: links\nnodes: [1]\nrepeats: 2\ncluster: {type: local}\n" + kLenet);
  const std::string victim = temp_path("victim");
  for (const std::string planted : {"raw.jsonl", "logs/0001-train-lenet-b8-n1-none-none-r2.rank0.log"}) {
    fs::remove_all(dir_);
    auto r = run_command(kBin + " sweep " + cfg + " --out " + dir_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    { std::ofstream(victim) << "precious\n"; }
    if (planted == "raw.jsonl") {
      fs::copy_file(dir_ + "/raw.jsonl", victim + ".raw");
      fs::remove(dir_ + "/raw.jsonl");
    } else {
      // Make repeat 2 run again on resume, so its log would be written.
      std::ifstream in(dir_ + "/raw.jsonl");
      std::string first;
      std::getline(in, first);
      { std::ofstream(dir_ + "/raw.jsonl") << first << "\n"; }
    }
    fs::remove(dir_ + "/" + planted);
    fs::create_symlink(victim, dir_ + "/" + planted);
    r = run_command(kBin + " sweep --resume " + dir_);
    EXPECT_NE(r.exit_code, 0) << planted << ": " << r.output;
    EXPECT_TRUE(has_all(r.output, {"--resume: ", planted, "is a symbolic link"})) << r.output;
    EXPECT_EQ(read_text(victim), "precious\n") << planted;
  }
}

// Two sweeps of one config started in the same second get a directory each, and each holds
// all of its own points; a second sweep or resume of a directory in use stops at once, naming
// the process that holds it, and touches nothing.
TEST_F(SweepTest, TwoSweepsNeverShareADirectory) {
  const std::string cfg = write_config("name: twin\nnodes: [1]\nrepeats: 2\ncluster: {type: local}\n" + kLenet);
  fs::create_directories(dir_);
  auto r = run_command("(" + kBin + " sweep " + cfg + " --results " + dir_ + " & " + kBin + " sweep " + cfg +
                       " --results " + dir_ + "; wait)");
  std::vector<std::string> runs;
  for (const auto& e : fs::directory_iterator(dir_)) runs.push_back(e.path().string());
  ASSERT_EQ(runs.size(), 2u) << r.output;
  for (const auto& run : runs) {
    const auto raw = read_raw(run);
    ASSERT_EQ(raw.size(), 2u) << run << "\n" << r.output;
    for (const auto& rec : raw) EXPECT_EQ(rec["status"], "ok") << rec.dump();
    EXPECT_FALSE(fs::exists(run + "/.lock")) << "the lock outlived its sweep";
  }
}

TEST_F(SweepTest, ADirectoryInUseIsNotResumedTwice) {
  const std::string cfg = write_config("name: busy\nnodes: [1]\nrepeats: 1\ncluster: {type: local}\n" + kLenet);
  auto r = run_command(kBin + " sweep " + cfg + " --out " + dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string raw_before = read_text(dir_ + "/raw.jsonl");
  // Another process holds the directory, as a running sweep does.
  const pid_t holder = fork();
  if (holder == 0) {
    const int fd = open((dir_ + "/.lock").c_str(), O_RDWR | O_CREAT, 0644);
    flock(fd, LOCK_EX);
    const std::string me = std::to_string(getpid());
    if (write(fd, me.data(), me.size()) < 0) _exit(1);
    pause();
    _exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (read_text(dir_ + "/.lock") != std::to_string(holder) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  r = run_command(kBin + " sweep --resume " + dir_);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(dir_ + " is in use by pid " + std::to_string(holder)), std::string::npos) << r.output;
  EXPECT_EQ(read_text(dir_ + "/raw.jsonl"), raw_before);
}

TEST_F(SweepTest, BadConfigRunsNothing) {
  const std::string cfg = write_config("name: bad\ncluster: {type: local}\ntrain: {models: [{model: lenet, batch: 0}]}\n");
  auto r = run_command(kBin + " sweep " + cfg + " --out " + dir_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("train.models[0].batch: must be from 1 to 65536 (got 0)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_));
  auto again = run_command(kBin + " sweep --resume " + dir_);
  EXPECT_NE(again.output.find("no config.yaml"), std::string::npos) << again.output;
}

TEST_F(SweepTest, EmulatedClusterCarriesThePoints) {
  std::string why;
  if (!can_emulate_cluster(&why)) GTEST_SKIP() << why;
  const std::string cfg = write_config("name: emu\nnodes: [2]\nrepeats: 1\ncluster: {type: emulated, link: 1gbit}\n"
                                       "transports: [tcp, mpi]\n" + kLenet +
                                       "collectives: {min_bytes: 4K, max_bytes: 64K, iters: 2, warmup_iters: 1}\n");
  auto r = run_command(kBin + " sweep " + cfg + " --out " + dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 4u);
  for (const auto& rec : raw) {
    EXPECT_EQ(rec["status"], "ok") << rec.dump();
    EXPECT_EQ(rec["cluster"]["type"], "emulated");
    EXPECT_EQ(rec["cluster"]["link"], "1gbit");
  }
  // Our ring really crossed the namespaces' links: rank 1 advertised its node's address.
  const json& hosts = raw[0]["train"]["meta"]["hosts"];
  EXPECT_EQ(hosts[1]["path"]["iface"], "eth0") << hosts.dump();
  EXPECT_EQ(hosts[1]["path"]["addr"].get<std::string>().rfind("10.77.0.2:", 0), 0u) << hosts.dump();
  EXPECT_EQ(raw[2]["collectives"]["rows"].size(), 6u);  // 4K, 16K, 64K, out-of-place and in-place
  // Nothing left behind.
  EXPECT_TRUE(leftover_namespaces(false).empty());
  // No namespace of a sweep (rb<pid>-...) is left; other namespaces may exist on this host.
  auto st = run_command("ip netns list | grep -E '^rb[0-9]+-' || true");
  EXPECT_EQ(st.output, "") << st.output;
}

TEST_F(SweepTest, WithoutRootTheEmulatedClusterFallsBackToLoopback) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run the sweep as an unprivileged user";
  if (run_command("command -v setpriv").exit_code != 0) GTEST_SKIP() << "setpriv (util-linux) not installed";
  const std::string cfg = write_config("name: fallback\nnodes: [2]\nrepeats: 1\n"
                                       "cluster: {type: emulated, link: 1gbit}\n" + kLenet);
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::all);
  auto r = run_command("setpriv --reuid 65534 --regid 65534 --clear-groups " + kBin + " sweep " + cfg +
                       " --out " + dir_ + "/run");
  if (r.output.find("Permission denied") != std::string::npos)
    GTEST_SKIP() << "the build is not readable by an unprivileged user: " << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto raw = read_raw(dir_ + "/run");
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0]["status"], "ok");
  EXPECT_EQ(raw[0]["cluster"]["type"], "local");
  const std::string note = raw[0]["cluster"]["note"];
  EXPECT_NE(note.find("FALLBACK"), std::string::npos) << note;
  EXPECT_NE(note.find("need root"), std::string::npos) << note;
  EXPECT_NE(read_text(dir_ + "/run/report.md").find("FALLBACK"), std::string::npos);
}

// `mpirun -np N ringbench sweep CONFIG` into `out`, the sweep ranks oversubscribing this machine.
testing::CommandResult sweep_under_mpirun(int ranks, const std::string& config_path, const std::string& out) {
  return run_command("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
                     "mpirun -np " + std::to_string(ranks) + " --oversubscribe " + kBin + " sweep " + config_path +
                     " --out " + out);
}

TEST_F(SweepTest, UnderMpirunSubsetsOfRanksRunEachNodeCount) {
  if (run_command("command -v mpirun").exit_code != 0) GTEST_SKIP() << "mpirun not installed";
  const std::string cfg = write_config("name: mpi\nnodes: [1, 2, 3]\nrepeats: 1\ncluster: {type: mpirun}\n" + kLenet);
  auto r = sweep_under_mpirun(2, cfg, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_EQ(raw[0]["status"], "ok") << raw[0].dump();
  EXPECT_EQ(raw[1]["status"], "ok") << raw[1].dump();
  EXPECT_EQ(raw[1]["train"]["ranks"].size(), 2u);
  EXPECT_EQ(raw[1]["cluster"]["type"], "mpirun");
  EXPECT_EQ(raw[2]["status"], "skipped");
  EXPECT_NE(raw[2]["error"].get<std::string>().find("mpirun started 2"), std::string::npos) << raw[2]["error"];
}

// Under mpirun the moving rank goes to another host: node B's sweep rank starts a standby target
// with the job, and the rank moves to it.
TEST_F(SweepTest, UnderMpirunARankMovesToTheStandbyOfNodeBsSweepRank) {
  if (run_command("command -v mpirun").exit_code != 0) GTEST_SKIP() << "mpirun not installed";
  const std::string cfg = write_config(
      "name: mig\nrepeats: 1\ntimeout: 120\ncluster: {type: mpirun}\nmigrate:\n  model: {model: lenet, batch: 8}\n"
      "  nodes: 2\n  at_step: 4\n  warmup: 2\n  steps: 20\n  methods: [stopcopy]\n  framebuffers: [32M]\n");
  auto r = sweep_under_mpirun(3, cfg, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 1u);
  ASSERT_EQ(raw[0]["status"], "ok") << raw[0].dump();
  const json& m = raw[0]["migrate"]["migration"];
  EXPECT_EQ(m["moved"], true) << m.dump();
  EXPECT_EQ(m["standby"], true);
  EXPECT_NE(raw[0]["command"].dump().find(R"("--migrate-to","standby")"), std::string::npos) << raw[0]["command"];
  EXPECT_NE(raw[0]["cluster"]["note"].get<std::string>().find("standby target on sweep rank 2"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ + "/" + raw[0]["logs"].get<std::string>() + ".standby.log"));
  EXPECT_NE(read_text(dir_ + "/report.md").find("(a standby process started with the job there)"), std::string::npos);
}

// A tiny infer sweep (LeNet up to batch 4, runs of a fraction of a second), `extra` under infer:.
std::string tiny_infer(const std::string& name, const std::string& extra) {
  return "name: " + name + "\nnodes: [1]\nrepeats: 1\ntimeout: 120\ncluster: {type: local}\ninfer:\n"
         "  models: [{model: lenet, max_batch: 4}]\n  server_qps: 50\n  min_duration: 0.2\n  min_queries: 8\n" + extra;
}

// infer points: a tiny infer config (LeNet, runs of a fraction of a second): its raw.jsonl
// records, the report's Inference section, and the report regenerated from raw.jsonl alone.
TEST_F(SweepTest, InferTinyLenetConfigEndToEnd) {
  const auto r = run_sweep(kBin, tiny_infer("tiny-infer", "  batches: [1, 4]\n  latency_bound_ms: 100\n"), dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[1/1] infer/lenet/b4/none r1: ok"), std::string::npos) << r.output;

  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 1u);
  const json& rec = raw[0];
  EXPECT_EQ(rec["kind"], "infer");
  EXPECT_EQ(rec["status"], "ok") << rec.dump();
  EXPECT_EQ(rec["batch"], 4);
  ASSERT_EQ(rec["infer"]["offline"].size(), 2u) << rec.dump();
  EXPECT_GT(rec["infer"]["offline"][1]["samples_per_s"].get<double>(), 0);
  EXPECT_FALSE(rec["infer"]["offline"][0]["validity"]["valid"].get<bool>());  // far below LoadGen's 600 s
  EXPECT_GT(rec["infer"]["single_stream"]["latency"]["p90_s"].get<double>(), 0);
  EXPECT_EQ(rec["infer"]["server"]["runs"].size(), 1u);
  EXPECT_EQ(rec["infer"]["meta"]["input"], "1x28x28");
  const auto& cmd = rec["command"];
  EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--threads"), cmd.end()) << cmd.dump();

  const std::string report = read_text(dir_ + "/report.md");
  EXPECT_TRUE(has_all(report, {"## Inference", "### lenet, batches up to 4 (infer/lenet/b4/none)",
                               "| 4 | ", "INVALID (min duration 600 s", "SingleStream", "Server at one rate"}));
  EXPECT_TRUE(testing::report_regenerates(kBin, dir_));
}

// The same under a time-sliced profile, alone and as 2 VMs serving at once under fixed share:
// each VM's results in raw.jsonl, the report's QPS at the p99 bound per profile and policy.
TEST_F(SweepTest, InferTwoVmsServingAtOnceEndToEnd) {
  const auto r = run_sweep(kBin,
                           tiny_infer("tiny-infer-share", "  scenarios: [offline, server]\n  latency_bound_ms: 200\n"
                                                          "  profiles: [T4-8C]\n  sharing: {vms_per_gpu: 2, policy: fixed_share}\n"),
                           dir_, "OMP_WAIT_POLICY=passive");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_all(r.output, {"[1/3] infer/lenet/b4/T4-8C r1: ok",
                                 "[3/3] infer/lenet/b4/T4-8C/fixed_share/vms2 r1: ok"})) << r.output;
  const auto raw = read_raw(dir_);
  ASSERT_EQ(raw.size(), 3u);
  const json& shared = raw.back();  // 2 VMs
  EXPECT_EQ(shared["status"], "ok") << shared.dump();
  EXPECT_EQ(shared["policy"], "fixed_share");
  EXPECT_EQ(shared["vms"], 2);
  ASSERT_EQ(shared["infer"]["vms"].size(), 2u) << shared.dump();
  for (const auto& vm : shared["infer"]["vms"]) {
    EXPECT_EQ(vm["offline"].size(), 1u);  // at the largest batch only
    EXPECT_EQ(vm["offline"][0]["batch"], 4);
    EXPECT_GT(vm["device"]["utilization"].get<double>(), 0);
  }
  EXPECT_EQ(shared["infer"]["meta"]["vgpu"]["mode"], "emulated");
  const std::string report = read_text(dir_ + "/report.md");
  EXPECT_TRUE(has_all(report, {"### QPS at the p99 bound per profile and policy",
                               "| lenet b4 | T4-8C | none (alone) | 1 |", "| lenet b4 | T4-8C | fixed_share | 2 |",
                               "Offline samples/s per VM"}));
  EXPECT_TRUE(testing::report_regenerates(kBin, dir_));
}

const std::string kTinyMigrate = R"(
name: tiny-migrate
repeats: 1
timeout: 120
cluster: {type: local}
migrate:
  model: {model: lenet, batch: 8}
  nodes: 3
  at_step: 6
  warmup: 2
  steps: 30
  methods: [precopy, stopcopy]
  framebuffers: [32M, 64M]
)";

// migrate points: LeNet on 3 local ranks, 30 steps, rank 2 moved by pre-copy and by
// stop-and-copy with 32 and 64 MiB framebuffers: raw.jsonl with the migration, the report's
// Live migration section, and the report regenerated from raw.jsonl alone.
TEST_F(SweepTest, MigrateTinyLenetConfigEndToEnd) {
  const auto r = run_sweep(kBin, kTinyMigrate, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_all(r.output, {"[1/4] migrate/lenet/b8/n3/tcp/precopy/fb32M r1: ok ", "precopy of 32 MiB: stun ",
                                 "[4/4] migrate/lenet/b8/n3/tcp/stopcopy/fb64M r1: ok ",
                                 "stopcopy of 64 MiB: stun "}));

  const auto raw = read_raw(dir_);
  EXPECT_EQ(raw.size(), 4u);
  for (const json& rec : raw) {
    EXPECT_EQ(rec["kind"], "migrate");
    EXPECT_EQ(rec["status"], "ok") << rec.dump();
    EXPECT_EQ(rec["migrate_at"], 6);
    const json& m = rec["migrate"]["migration"];
    EXPECT_EQ(m["moved"], true) << m.dump();
    EXPECT_EQ(m["rank"], 2);
    EXPECT_EQ(m["method"], rec["method"]);
    EXPECT_EQ(m["framebuffer_bytes"].get<double>(), rec["framebuffer"] == "32M" ? 32 << 20 : 64 << 20);
    EXPECT_GT(m["stun_s"].get<double>(), 0);
    EXPECT_EQ(rec["migrate"]["ranks"][0]["step_s"].size(), 30u);
    const auto& cmd = rec["command"];
    EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--migrate-at"), cmd.end()) << cmd.dump();
    EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--threads"), cmd.end()) << cmd.dump();
  }

  const std::string report = read_text(dir_ + "/report.md");
  EXPECT_TRUE(has_all(report, {"## Live migration", "### lenet b8 on 3 nodes (tcp)", "| pre-copy | 32 MiB | 1/1 |",
                               "| stop-and-copy | 64 MiB | 1/1 |", "**Model**", "| pre-copy | 24 GiB |",
                               "(predicted)"}));
  EXPECT_TRUE(testing::report_regenerates(kBin, dir_));
}

}  // namespace
}  // namespace ringbench
