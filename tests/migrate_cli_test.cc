// Live migration end to end: `ringbench train --ranks 3` whose rank 2 moves to a new process
// ends bit-identical to a run whose rank stayed, by pre-copy and by stop-and-copy; a move that
// fails half way resumes the rank where it was; a rank that dies while stunned fails every rank
// with an error naming it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/run_command.h"

namespace ringbench::migrate {
namespace {

using json = nlohmann::json;

struct TrainRun {
  int exit_code = 0;
  std::string output;
  json doc;
};

const std::string kLenet = "--model lenet --batch 8";

TrainRun train(const std::string& extra, const std::string& timeout_s = "5", const std::string& model = kLenet) {
  const std::string out = testing::temp_path("migrate") + ".json";
  const std::string cmd = std::string(RINGBENCH_BIN) + " train --ranks 3 " + model +
                          " --warmup 2 --steps 40 --log-every 0 "
                          "--threads 1 --timeout " + timeout_s + " --json " + out + " " + extra;
  TrainRun r;
  const auto res = testing::run_command(cmd);
  r.exit_code = res.exit_code;
  r.output = res.output;
  std::ifstream in(out);
  if (in) r.doc = json::parse(in, nullptr, false);
  return r;
}

// The first CPU this test may run on (under taskset or a cpuset it need not be 0).
int first_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) return c;
  return 0;
}

// Every rank's parameters and batch-norm statistics, and the loss, equal the unmigrated run's.
void expect_same_as(const TrainRun& r, const TrainRun& base) {
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const json& hashes = r.doc["summary"]["final_hashes"];
  ASSERT_EQ(hashes["params"].size(), 3u);
  EXPECT_EQ(hashes, base.doc["summary"]["final_hashes"]) << r.output;
  EXPECT_EQ(r.doc["summary"]["final_loss"], base.doc["summary"]["final_loss"]);
}

class EndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { baseline_ = new TrainRun(train("")); }
  static void TearDownTestSuite() { delete baseline_; }
  static const TrainRun& baseline() { return *baseline_; }
  static void expect_same_result(const TrainRun& r) { expect_same_as(r, baseline()); }

 private:
  static inline TrainRun* baseline_ = nullptr;
};

TEST_F(EndToEnd, PreCopyMovesTheRankAndTheResultIsBitIdentical) {
  const std::string trace = testing::temp_path("trace") + ".json";
  const TrainRun r = train("--migrate-at 4 --migrate-method precopy --framebuffer 32M --timeline " + trace);
  expect_same_result(r);
  const json& m = r.doc["migration"];
  EXPECT_EQ(m["moved"], true) << r.output;
  EXPECT_EQ(m["forced_at_last_step"], false);
  EXPECT_EQ(m["method"], "precopy");
  EXPECT_GE(m["precopy_bytes"].get<double>(), 32.0 * (1 << 20));  // round 1 moved it all
  EXPECT_LT(m["stun_bytes"].get<double>(), 32.0 * (1 << 20));
  EXPECT_GT(m["stun_s"].get<double>(), 0);
  EXPECT_TRUE(testing::has_all(r.output, {"# migration of rank 2 (precopy)"}));
  // Rank 0's trace shows the phases on a track of their own.
  const std::string rank0 = trace.substr(0, trace.size() - 5) + ".rank0.json";
  std::ifstream t(rank0);
  std::stringstream text;
  text << t.rdbuf();
  EXPECT_TRUE(testing::has_all(text.str(), {"migration of rank 2 (precopy)", "pre-copy:", "stun: copy",
                                            "resume on the new node"}))
      << rank0;
}

// The target runs on the CPUs asked for (node B's, in a sweep), and the results say where it ran.
TEST_F(EndToEnd, StopAndCopyMovesTheRankAndTheResultIsBitIdentical) {
  const int cpu = first_allowed_cpu();
  const TrainRun r =
      train("--migrate-at 4 --migrate-method stopcopy --framebuffer 32M --migrate-cpus " + std::to_string(cpu));
  expect_same_result(r);
  const json& m = r.doc["migration"];
  EXPECT_EQ(m["moved"], true) << r.output;
  EXPECT_EQ(m["target_cpus"], json::array({cpu}));
  EXPECT_EQ(m["precopy_bytes"], 0);
  EXPECT_EQ(m["stun_bytes"].get<double>(), 32.0 * (1 << 20));
}

// Migrating before the last step: no time to pre-copy, so the last step stuns, and says so.
TEST_F(EndToEnd, TheLastStepForcesTheStunAndTheOutputSaysSo) {
  const TrainRun r = train("--migrate-at 41 --migrate-method precopy --framebuffer 32M");
  expect_same_result(r);
  EXPECT_EQ(r.doc["migration"]["moved"], true) << r.output;
  EXPECT_EQ(r.doc["migration"]["forced_at_last_step"], true);
  EXPECT_TRUE(testing::has_all(r.output, {"the stun was forced by the run's last step"}));
}

TEST_F(EndToEnd, AnUnreachableTargetResumesTheRankOnItsNode) {
  const TrainRun r = train("--migrate-at 4 --migrate-fault target-unreachable", "2");
  expect_same_result(r);
  EXPECT_EQ(r.doc["migration"]["moved"], false);
  EXPECT_TRUE(testing::has_all(r.output, {"the migration to", "failed", "resuming on this node",
                                          "# migration of rank 2 FAILED, resumed on its node"}));
}

TEST_F(EndToEnd, AKilledTargetResumesTheRankOnItsNode) {
  const TrainRun r = train("--migrate-at 4 --migrate-fault target-killed");
  expect_same_result(r);
  EXPECT_EQ(r.doc["migration"]["moved"], false);
  EXPECT_TRUE(testing::has_all(r.output, {"resuming on this node"}));
}

// A standby started with the job (as on a real cluster, where node B runs its own process) takes
// the rank: the launcher of --ranks 3 starts it beside the ranks.
TEST_F(EndToEnd, AStandbyStartedWithTheJobTakesTheRankBitIdentically) {
  const TrainRun r = train("--migrate-at 4 --migrate-to standby --framebuffer 32M");
  expect_same_result(r);
  const json& m = r.doc["migration"];
  EXPECT_EQ(m["moved"], true) << r.output;
  EXPECT_TRUE(m["to"].get<std::string>().rfind("127.0.0.1:", 0) == 0) << m["to"];
  EXPECT_EQ(m["standby"], true);
  EXPECT_GT(m["stun_s"].get<double>(), 0);
}

// A stranger on every port this job's processes listen on (on 127.0.0.1), as soon as it opens:
// `per_port` connections, each sending `junk` and closing (junk: garbage), or held open, silent,
// until the knocker ends (no junk).
class Knocker {
 public:
  Knocker(int per_port, std::string junk) : per_port_(per_port), junk_(std::move(junk)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Knocker() { stop(); }
  // Stops knocking, closes what it held; the ports it knocked on.
  std::set<int> stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : held_) ::close(fd);
    held_.clear();
    return knocked_;
  }

 private:
  void run() {
    while (!done_) {
      std::istringstream lines(testing::run_command("ss -Hltnp 2>/dev/null").output);
      for (std::string line; std::getline(lines, line);) {
        const size_t at = line.find("127.0.0.1:"), pid_at = line.find("pid=");
        if (at == std::string::npos || pid_at == std::string::npos) continue;
        // Only this job's processes (ranks exec /proc/self/exe, so their name is "exe").
        std::error_code ec;
        const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(std::atoi(line.c_str() + pid_at + 4)) + "/exe", ec);
        if (ec || !std::filesystem::equivalent(exe, RINGBENCH_BIN, ec)) continue;
        const int port = std::atoi(line.c_str() + at + 10);
        if (port <= 0 || !knocked_.insert(port).second) continue;
        for (int i = 0; i < per_port_; ++i) knock(port);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  void knock(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(uint16_t(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    if (connected && !junk_.empty()) {
      [[maybe_unused]] const ssize_t n = ::send(fd, junk_.data(), junk_.size(), MSG_NOSIGNAL);
    }
    if (connected && junk_.empty()) {
      held_.push_back(fd);
    } else {
      ::close(fd);
    }
  }

  int per_port_;
  std::string junk_;
  std::atomic<bool> done_{false};
  std::set<int> knocked_;
  std::vector<int> held_;
  std::thread thread_;
};

// The standby listens for the whole run before the migration. Strangers connecting to every port
// the job listens on (its store, the standby; the ring listens only while it forms) and sending
// garbage change nothing: each connection is refused, and the rank still moves, bit-identically.
TEST_F(EndToEnd, StrangersKnockingOnEveryPortOfTheJobChangeNothing) {
  if (testing::run_command("ss -Hltnp > /dev/null 2>&1").exit_code != 0) GTEST_SKIP() << "needs ss (iproute2)";
  std::string junk = "a stranger says hello, with no secret and no protocol at all";
  junk.resize(64, '.');  // a whole hello's length: read, and refused for what it says
  Knocker knocker(1, junk);
  const TrainRun r = train("--migrate-at 30 --migrate-to standby --framebuffer 32M");
  const std::set<int> knocked = knocker.stop();
  expect_same_result(r);
  EXPECT_EQ(r.doc["migration"]["moved"], true) << r.output;
  EXPECT_GE(knocked.size(), 2u);  // the store and the standby (the ring listens only while it forms)
  EXPECT_TRUE(testing::has_all(r.output, {"[rank 2 standby] refused: a connection from 127.0.0.1:",
                                          "is not a ringbench migration source"}))
      << r.output;
  EXPECT_GE(r.doc["migration"]["refused_connections"], 1);
}

// Silent strangers held open on the standby's port (three on each port of the job) from before the
// migration until after it: the standby no longer serves them one at a time, each with the whole
// --timeout for its hello (the source's handshake timed out behind them and the move failed). They
// are refused within their window, the rank moves, and the results count them.
TEST_F(EndToEnd, SilentStrangersHeldOpenOnTheStandbyDoNotStopTheMove) {
  if (testing::run_command("ss -Hltnp > /dev/null 2>&1").exit_code != 0) GTEST_SKIP() << "needs ss (iproute2)";
  Knocker knocker(3, "");
  const TrainRun r = train("--migrate-at 30 --migrate-to standby --framebuffer 32M");
  knocker.stop();
  expect_same_result(r);
  const json& m = r.doc["migration"];
  EXPECT_EQ(m["moved"], true) << r.output;
  EXPECT_GE(m["refused_connections"], 3) << r.output;
  EXPECT_EQ(m["refused_during_stun"], false);  // all came, and were refused, before the stun
  EXPECT_TRUE(testing::has_all(r.output, {"[rank 2 standby] refused: a connection from 127.0.0.1:",
                                          "the target refused", "unauthenticated connection"}))
      << r.output;
}

TEST_F(EndToEnd, AStandbyThatIsNotNeededLeavesAndTheRankResumes) {
  const TrainRun r = train("--migrate-at 4 --migrate-to standby --migrate-fault target-unreachable", "2");
  expect_same_result(r);
  EXPECT_EQ(r.doc["migration"]["moved"], false);
  EXPECT_TRUE(testing::has_all(r.output, {"resuming on this node", "[rank 2 on its new node] # standby: not needed, "
                                          "rank 2 stayed on its node"}));
}

TEST_F(EndToEnd, ASourceThatDiesWhileStunnedFailsEveryRankNamingIt) {
  const TrainRun r = train("--migrate-at 4 --migrate-fault source-killed", "2");
  EXPECT_NE(r.exit_code, 0);
  for (const std::string rank : {"[rank 0]", "[rank 1]"})
    EXPECT_TRUE(testing::has_all(r.output, {rank + " ringbench train: error: rank 2 stopped for its migration and made no progress"}));
}

// Batch-norm statistics are each rank's own: the migrated rank's must come back exactly.
TEST(EndToEndBatchNorm, MobileNetsStatisticsMoveWithTheRank) {
  const std::string model = "--model mobilenet_v1 --image-size 32 --batch 2 --classes 10";
  const TrainRun base = train("", "10", model);
  const TrainRun r = train("--migrate-at 4 --migrate-method stopcopy", "10", model);
  expect_same_as(r, base);
  EXPECT_EQ(r.doc["migration"]["moved"], true) << r.output;
  const json& state = r.doc["summary"]["final_hashes"]["batchnorm_state"];
  EXPECT_NE(state[0], state[2]);  // each rank's own statistics: the test could tell a swap
}

}  // namespace
}  // namespace ringbench::migrate
