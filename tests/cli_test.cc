// End-to-end tests of `ringbench allreduce` launched locally (--ranks N) and by hand through the
// RINGBENCH_* environment: output, JSON, exit codes, and the errors users get for bad input.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "collectives/net.h"
#include "tests/run_command.h"

#include <unistd.h>

namespace ringbench {
namespace {

using namespace ringbench::testing;  // run_command.h
const std::string kBin = RINGBENCH_BIN;

// The children of `pid`, from /proc (empty when it has none or is gone).
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t c; f >> c;) out.push_back(c);
  return out;
}

// Whether `pid` still runs (a zombie waiting for init to reap it does not).
bool running(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// A launcher killed outright (SIGKILL: no handler runs) takes its ranks along instead of
// leaving them spinning under init.
TEST(Cli, RanksDieWithTheirLauncher) {
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    execl(kBin.c_str(), kBin.c_str(), "allreduce", "--ranks", "2", "-b", "16M", "-e", "16M", "-n", "100000",
          "--timeout", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::vector<pid_t> ranks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((ranks = children_of(launcher)).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(ranks.size(), 2u) << "the launcher did not start its 2 ranks";
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (pid_t r : ranks) {
    while (running(r) && std::chrono::steady_clock::now() < gone_by)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(running(r)) << "rank pid " << r << " outlived its launcher";
    if (running(r)) kill(r, SIGKILL);
  }
}

TEST(Cli, LocalRanksWriteTableAndJson) {
  auto [code, output, doc] = run_json(kBin + " allreduce --ranks 3 -b 0 -e 64K -f 8 -n 3 -w 1 --timeout 10");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# Out of bounds values : 0 OK", "transport=tcp"}));
  EXPECT_EQ(doc["meta"]["ranks"], 3);
  EXPECT_EQ(doc["meta"]["launcher"], "local");
  ASSERT_EQ(doc["meta"]["hosts"].size(), 3u);
  for (auto& h : doc["meta"]["hosts"]) EXPECT_EQ(h["path"]["transport"], "tcp");
  // sizes 0, 4, 32, 256, 2048, 16384, 65536: out-of-place and in-place rows each
  ASSERT_EQ(doc["rows"].size(), 14u);
  for (auto& row : doc["rows"]) {
    for (const char* k : {"bytes", "count", "dtype", "op", "inplace", "time_us", "p50_us", "p99_us",
                          "algbw_gbps", "busbw_gbps", "cpu_us", "wrong"})
      EXPECT_TRUE(row.contains(k)) << k;
    EXPECT_GE(row["cpu_us"].get<double>(), 0);
    EXPECT_EQ(row["wrong"], 0);
    EXPECT_NEAR(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>() * 4.0 / 3.0, 1e-9);
  }
  EXPECT_EQ(doc["rows"].back()["bytes"], 65536);
}

// --transport shm: our ring over shared memory, exact, and the path says so on every rank.
TEST(Cli, ShmTransportIsExactAndSaysSo) {
  auto [code, output, doc] =
      run_json(kBin + " allreduce --ranks 3 --transport shm -b 0 -e 1M -f 16 -n 2 -w 1 --timeout 10");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"ring (ours) over shm", "# Out of bounds values : 0 OK"}));
  EXPECT_EQ(doc["meta"]["transport"], "shm");
  for (auto& h : doc["meta"]["hosts"]) EXPECT_EQ(h["path"]["transport"], "shm");
  for (auto& row : doc["rows"]) EXPECT_EQ(row["wrong"], 0);
}

// --shm-single-copy: large messages read straight out of the sender's memory where the kernel
// allows it (the path says which), exact either way; a threshold under 4K is refused.
TEST(Cli, ShmSingleCopyIsExactAndSaysSo) {
  auto [code, output, doc] = run_json(kBin + " allreduce --ranks 2 --transport shm --shm-single-copy 64K -b 4K "
                                      "-e 4M -f 16 -n 2 -w 1 --timeout 10");
  ASSERT_EQ(code, 0) << output;
  EXPECT_EQ(doc["meta"]["options"]["shm_single_copy_bytes"], 65536);
  for (auto& h : doc["meta"]["hosts"]) {
    const std::string sc = h["path"]["single_copy"];
    EXPECT_TRUE(sc == "off" || sc.rfind("cma >= 65536 bytes", 0) == 0) << sc;
  }
  for (auto& row : doc["rows"]) EXPECT_EQ(row["wrong"], 0);
  EXPECT_TRUE(fails_saying(kBin + " allreduce --ranks 2 --transport shm --shm-single-copy 100",
                           "--shm-single-copy must be 0 (off) or at least 4K"));
}

// --shm-reduce: the ring forwards each message into the next rank's ring as it arrives (the
// default), reduces it straight out of the shared ring, or after a copy into a slot; all exact, at
// half precision too (2-byte elements), and the path says which.
TEST(Cli, ShmReduceOnTheWayInTheRingOrAfterACopyIsExactAndSaysSo) {
  const std::map<std::string, std::string> path = {
      {"forward", "on the way to the next rank"}, {"ring", "from the ring"}, {"copy", "after a copy"}};
  for (const auto& [how, says] : path) {
    auto [code, output, doc] = run_json(kBin + " allreduce --ranks 3 --transport shm --shm-reduce " + how +
                                        " -b 4K -e 4M -f 32 -n 2 -w 1 -d half -o avg --timeout 10");
    ASSERT_EQ(code, 0) << output;
    EXPECT_EQ(doc["meta"]["options"]["shm_reduce"], how);
    for (auto& h : doc["meta"]["hosts"]) EXPECT_EQ(h["path"]["reduce"], says);
    for (auto& row : doc["rows"]) EXPECT_EQ(row["wrong"], 0);
  }
  EXPECT_TRUE(fails_saying(kBin + " allreduce --ranks 2 --transport shm --shm-reduce fast", "--shm-reduce"));
}

TEST(Cli, HalfAverageWithTwoRanks) {
  auto r = run_command(kBin + " allreduce --ranks 2 -b 1K -e 1M -f 32 -n 2 -w 0 -d half -o avg --segment 4K");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("half"), std::string::npos);
}

TEST(Cli, SingleRankRuns) {
  auto r = run_command(kBin + " allreduce -b 1K -e 4K -n 2 -w 0 -d bfloat16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

TEST(Cli, BadOptionsAreClearErrors) {
  EXPECT_TRUE(fails_saying(kBin + " allreduce -b 1M -e 1K", "minbytes"));
  EXPECT_TRUE(fails_saying(kBin + " allreduce -d int8", "use float, half or bfloat16"));
  EXPECT_TRUE(fails_saying(kBin + " allreduce -e 12Q", "unknown unit"));
  // Numbers: NaN, infinity and overflow are refused naming the option; sizes this machine cannot
  // hold, and socket buffers too small to carry a segment, are refused before anything runs.
  const std::vector<std::pair<std::string, std::string>> non_finite{
      {"--timeout", "nan"}, {"--timeout", "inf"}, {"-f", "nan"}, {"-f", "1e999"}};
  testing::CommandResult r;
  for (const auto& [option, value] : non_finite) {
    r = run_command(kBin + " allreduce -b 1K -e 4K " + option + " " + value);
    EXPECT_EQ(r.exit_code, 1) << option << " " << value << ": " << r.output;
    EXPECT_NE(r.output.find("'" + value + "' is not a finite number"), std::string::npos) << r.output;
  }
  r = run_command(kBin + " train --model lenet --steps 1 --lr inf");
  EXPECT_NE(r.output.find("--lr: 'inf' is not a finite number"), std::string::npos) << r.output;
  r = run_command(kBin + " allreduce -b 64G -e 64G");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("-e/--maxbytes 64G needs 128.0 GiB of buffers per rank (input, output); this machine has"), std::string::npos)
      << r.output;
  r = run_command(kBin + " allreduce --ranks 2 -b 1M -e 1M --socket-buffer 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--socket-buffer 1: must be 0 (the kernel's autotuning) or 64K to 1G"), std::string::npos)
      << r.output;
  r = run_command(kBin + " allreduce --ranks 1000");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--ranks 1000: at most 256 ranks on one machine"), std::string::npos) << r.output;
  // Not built, no device, or no such device: each says so, naming --transport verbs.
  EXPECT_TRUE(fails_saying(kBin + " allreduce --transport verbs --ib-dev no_such_dev0", "--transport verbs"));
}


// Results never replace what is not a regular file: a symlink is written through (the link
// stays, its target gets the result), a FIFO or device is refused before anything runs, and a
// missing directory is an error at once, with the OS's reason.
TEST(Cli, JsonIsWrittenThroughASymlinkNeverOverIt) {
  const std::string real = temp_path("real") + ".json", link = temp_path("link") + ".json";
  { std::ofstream(real) << "old\n"; }
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  auto r = run_command(kBin + " allreduce -b 4K -e 4K -n 1 -w 0 --json " + link);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  struct stat st {};
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << link << " was replaced";
  EXPECT_EQ(read_json(real)["rows"].size(), 2u);
  std::remove(link.c_str());
  std::remove(real.c_str());
}

TEST(Cli, JsonIsNeverWrittenOverAFifoOrADevice) {
  const std::string fifo = temp_path("fifo") + ".json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& cmd : std::vector<std::string>{" allreduce --ranks 2 -b 4K -e 4K -n 1 --json ",
                                                         " train --model lenet --steps 1 --json "}) {
    auto r = run_command(kBin + cmd + fifo);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("--json " + fifo + " is a FIFO"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("busbw"), std::string::npos) << "ran before refusing: " << r.output;
    struct stat st {};
    ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << fifo << " was replaced";
  }
  std::remove(fifo.c_str());
}

TEST(Cli, JsonIntoAMissingDirectoryFailsBeforeRunning) {
  const std::string dir = temp_path("no-such-dir");
  auto r = run_command(kBin + " allreduce --ranks 2 -b 4K -e 4K -n 1 --json " + dir + "/out.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--json " + dir + "/out.json: directory " + dir + ": No such file or directory"),
            std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("busbw"), std::string::npos) << "ran before refusing: " << r.output;
}

// A disk that fills up in the middle of a run: the error names the file and carries the OS's
// reason, the JSON keeps the last complete version written before (results are rewritten
// atomically after every row), and no temporary file is left. The "disk" is an 8 KiB tmpfs in
// a mount namespace of its own: the first versions fit, a later one (with its old version
// still there) does not.
TEST(Cli, FullDiskIsAClearErrorAndKeepsTheLastCompleteJson) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a tmpfs in a mount namespace)";
  const std::string disk = temp_path("full-disk"), kept = temp_path("full-disk-kept.json"),
                    listing = temp_path("full-disk-ls");
  mkdir(disk.c_str(), 0700);
  // One rank: with two, their stderr lines can interleave and split the message checked below.
  const std::string inside = "mount -t tmpfs -o size=8k ringbench-full " + disk + " || exit 77; " + kBin +
                             " allreduce --ranks 1 -b 4K -e 4M -f 2 -n 1 -w 0 --json " + disk +
                             "/out.json; rc=$?; cp " + disk + "/out.json " + kept + "; ls -A " + disk + " > " +
                             listing + "; exit $rc";
  auto r = run_command("unshare -m sh -c '" + inside + "'");
  if (r.exit_code == 77) GTEST_SKIP() << "cannot mount a tmpfs here: " << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: cannot write " + disk + "/out.json: writing " + disk + "/out.json.tmp."),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  std::ifstream f(kept);
  ASSERT_TRUE(f.good()) << "the JSON written before the disk filled up is gone: " << r.output;
  const auto doc = nlohmann::json::parse(f, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "the kept JSON is not complete";
  EXPECT_TRUE(doc.contains("meta"));
  std::ifstream ls(listing);
  std::string names((std::istreambuf_iterator<char>(ls)), std::istreambuf_iterator<char>());
  EXPECT_EQ(names, "out.json\n") << "a temporary file was left behind";
}

TEST(Cli, MpiImplNeedsMpirun) {
  EXPECT_TRUE(fails_saying(kBin + " allreduce --impl mpi -e 4K", "mpirun"));
}

// Without NCCL in the build or a GPU here, --impl nccl fails at once, before any rank starts,
// saying which; the metadata of any run says why there is no GPU. With both, it runs (the gpu
// tests cover it).
TEST(Cli, NcclImplWithoutNcclOrGpuIsAClearError) {
  const auto r = run_command(kBin + " allreduce --impl nccl --ranks 2 -e 4K -n 1 -w 0");
  if (r.exit_code == 0) GTEST_SKIP() << "NCCL and a GPU are here: --impl nccl ran";
  EXPECT_TRUE(refused_without_gpu(r, "--impl nccl is not available: ", "NCCL"));
  EXPECT_TRUE(fails_saying(kBin + " allreduce --impl gloo", "use ring, mpi or nccl"));
  auto [code, output, doc] = run_json(kBin + " allreduce -b 4K -e 4K -n 1 -w 0");
  ASSERT_EQ(code, 0) << output;
  EXPECT_NE(output.find("# gpu: "), std::string::npos) << output;
  const auto gpu = doc["meta"]["hosts"][0]["gpu"];
  if (!gpu["available"].get<bool>()) {
    EXPECT_FALSE(gpu["reason"].get<std::string>().empty()) << gpu;
  }
}

// Two ranks started by hand with different sweeps: both must stop with a clear error.
// Ranks started by hand prove they belong to the job with its secret: off loopback none may run
// without one, a secret that is short or in a file others can read is refused, and a rank with
// another job's secret is turned away by the store.
TEST(Cli, RanksStartedByHandNeedTheJobsSecret) {
  // 192.0.2.1 (TEST-NET-1) is never contacted: the rank refuses before connecting.
  auto r = run_command("RINGBENCH_RANK=1 RINGBENCH_WORLD_SIZE=2 RINGBENCH_STORE=192.0.2.1:29500 " + kBin +
                       " allreduce -e 4K");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("is not on loopback, and this rank has no secret: set RINGBENCH_SECRET"), std::string::npos)
      << r.output;
  r = run_command("RINGBENCH_SECRET=abcd RINGBENCH_RANK=1 RINGBENCH_WORLD_SIZE=2 RINGBENCH_STORE=192.0.2.1:29500 " +
                  kBin + " allreduce -e 4K");
  EXPECT_NE(r.output.find("RINGBENCH_SECRET: a secret needs at least 128 bits"), std::string::npos) << r.output;
  const std::string file = temp_path("secret");
  { std::ofstream(file) << std::string(64, 'a') << "\n"; }
  chmod(file.c_str(), 0644);
  r = run_command("RINGBENCH_RANK=1 RINGBENCH_WORLD_SIZE=2 RINGBENCH_STORE=192.0.2.1:29500 " + kBin +
                  " allreduce -e 4K --secret-file " + file);
  EXPECT_NE(r.output.find("--secret-file " + file + " can be read by others (mode 644): chmod 600 it"),
            std::string::npos) << r.output;
  std::remove(file.c_str());

  int port = 0;
  ::close(net::listen_tcp("127.0.0.1", 0, &port));
  const std::string env = "RINGBENCH_WORLD_SIZE=2 RINGBENCH_STORE=127.0.0.1:" + std::to_string(port) + " ";
  const std::string out1 = temp_path("rank1");
  r = run_command("(RINGBENCH_RANK=0 RINGBENCH_STORE_SERVE=1 RINGBENCH_SECRET=" + std::string(64, 'a') + " " + env +
                  kBin + " allreduce -e 4K --timeout 3 >/dev/null 2>&1 &) ; sleep 0.5; RINGBENCH_RANK=1 RINGBENCH_SECRET=" +
                  std::string(64, 'b') + " " + env + kBin + " allreduce -e 4K --timeout 3");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rejected this rank: it does not share the job's secret"), std::string::npos) << r.output;
}

// The name of an interface with an IPv4 address off loopback ("" when this machine has none).
std::string non_loopback_iface() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* it = list; it && name.empty(); it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
    const uint32_t a = ntohl(reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr);
    if ((a >> 24) != 127) name = it->ifa_name;
  }
  freeifaddrs(list);
  return name;
}

// Without a secret every MAC is keyed by the empty string, which anyone can compute: a rank
// started by hand without one listens only on loopback (its store, its ring, its migration), and
// an --addr or --iface off loopback is refused at once, naming the option. With a secret, or on
// loopback, the same run goes ahead.
TEST(Cli, RanksWithoutASecretListenOnlyOnLoopback) {
  int port = 0;
  ::close(net::listen_tcp("127.0.0.1", 0, &port));
  const std::string env = "RINGBENCH_RANK=0 RINGBENCH_STORE_SERVE=1 RINGBENCH_WORLD_SIZE=1 RINGBENCH_STORE=127.0.0.1:" +
                          std::to_string(port) + " ";
  const std::string run = kBin + " allreduce -b 4K -e 4K -n 2 -w 1 --timeout 5 ";
  auto r = run_command(env + run + "--addr 0.0.0.0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has_all(r.output, {"--addr 0.0.0.0: without a secret every listener must be on loopback (0.0.0.0 is "
                                 "not); set RINGBENCH_SECRET or --secret-file"}));
  if (const std::string iface = non_loopback_iface(); !iface.empty()) {
    r = run_command(env + run + "--iface " + iface);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(has_all(r.output, {"--iface " + iface + ": without a secret every listener must be on loopback"}));
  }
  r = run_command(env + run + "--addr 127.0.0.1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_command(env + run + "--iface lo");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_command("RINGBENCH_SECRET=" + std::string(64, 'a') + " " + env + run + "--addr 0.0.0.0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The command line of `pid` (its arguments joined by spaces; "" when it is gone).
std::string cmdline_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
  std::string text((std::istreambuf_iterator<char>(f)), {});
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

// A standby that is stopped (SIGSTOP: it never exits by itself) gets the ranks' bounded wait:
// when every rank has ended, the --ranks launcher kills it `grace` later (2 x --timeout + 2 s)
// and fails, naming it, instead of waiting for it forever.
TEST(Cli, AStoppedStandbyIsKilledAfterTheRanksEnd) {
  const std::string out = temp_path("standby") + ".txt";
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(kBin.c_str(), kBin.c_str(), "train", "--ranks", "2", "--model", "lenet", "--batch", "8", "--warmup", "1",
          "--steps", "8", "--log-every", "0", "--threads", "1", "--timeout", "2", "--migrate-at", "4",
          "--migrate-to", "standby", "--framebuffer", "32M",
          // The rank stays on its node without waiting on the standby: training ends however slow
          // the machine (a sanitizer build), and only the stopped standby is left to end.
          "--migrate-fault", "target-unreachable", static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t standby = 0;
  const auto found_by = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (standby == 0 && std::chrono::steady_clock::now() < found_by) {
    for (pid_t c : children_of(launcher))
      if (cmdline_of(c).find("--migrate-standby") != std::string::npos) standby = c;
    if (standby == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(standby, 0) << "the launcher did not start a standby";
  kill(standby, SIGSTOP);
  // Training takes a few seconds, the grace 6 s; a launcher still waiting after 60 s hangs.
  int status = 0;
  pid_t done = 0;
  const auto hang_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((done = waitpid(launcher, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < hang_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (done == 0) {
    kill(launcher, SIGKILL);  // its ranks and standby die with it (PR_SET_PDEATHSIG)
    waitpid(launcher, &status, 0);
  }
  std::ifstream f(out);
  const std::string output((std::istreambuf_iterator<char>(f)), {});
  ASSERT_NE(done, 0) << "the launcher still waited for its stopped standby 60 s on:\n" << output;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << output;
  EXPECT_TRUE(has_all(output, {"ringbench: killing the standby of rank 1 (pid " + std::to_string(standby) +
                               "): still running 6000 ms after every rank ended (stopped, or hung)"}));
  EXPECT_FALSE(running(standby));
}

TEST(Cli, RanksWithDifferentOptionsFail) {
  int port = 0;
  int fd = net::listen_tcp("127.0.0.1", 0, &port);
  ::close(fd);
  std::string env = "RINGBENCH_WORLD_SIZE=2 RINGBENCH_STORE=127.0.0.1:" + std::to_string(port) +
                    " RINGBENCH_JOB_ID=t ";
  std::string out0 = temp_path("rank0"), out1 = temp_path("rank1");
  std::string cmd = "(RINGBENCH_RANK=0 RINGBENCH_STORE_SERVE=1 " + env + kBin +
                    " allreduce -e 64K --timeout 5 >" + out0 + " 2>&1; echo $? >>" + out0 +
                    ") & (RINGBENCH_RANK=1 " + env + kBin + " allreduce -e 128K --timeout 5 >" +
                    out1 + " 2>&1; echo $? >>" + out1 + "); wait";
  auto r = run_command(cmd);
  for (auto& f : {out0, out1}) {
    std::ifstream in(f);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(text.find("differ from rank 0"), std::string::npos) << f << ":\n" << text;
    EXPECT_NE(text.substr(text.rfind('\n', text.size() - 2) + 1), "0\n") << text;
  }
}

}  // namespace
}  // namespace ringbench
