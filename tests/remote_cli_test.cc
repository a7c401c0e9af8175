// `ringbench device-server` and `train`/`infer --device remote:HOST:PORT` end to end: a run on
// the remote device ends with the same parameters as a run on the same backend here, says what
// is emulated and counts its traffic; bad device specs and a missing secret are clear errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using namespace ringbench::testing;
using nlohmann::json;
const std::string kBin = RINGBENCH_BIN;
const std::string kSecretEnv = "RINGBENCH_SECRET=" + std::string(64, 'a') + " ";

// A device server for `clients` clients, in the background; its port once it listens.
struct Server {
  explicit Server(int clients) {
    port_file = temp_path("port");
    log = temp_path("server") + ".log";
    const std::string cmd = kSecretEnv + kBin + " device-server --threads 1 --port-file " + port_file +
                            " --clients " + std::to_string(clients) + " --timeout 20 >" + log + " 2>&1";
    pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 2000 && port == 0; ++i) {
      std::ifstream(port_file) >> port;
      if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Server() {
    if (pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
  // Waits for it to exit (it serves `clients` clients); its output.
  std::string finish() {
    for (int i = 0; i < 2000 && waitpid(pid, nullptr, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pid = -1;
    std::stringstream ss;
    ss << std::ifstream(log).rdbuf();
    return ss.str();
  }
  std::string port_file, log;
  pid_t pid = -1;
  int port = 0;
};

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(RemoteCli, TrainOnARemoteDeviceEndsWithTheParametersOfALocalRun) {
  Server server(1);
  ASSERT_GT(server.port, 0);
  const std::string common = " train --model lenet --batch 4 --steps 3 --warmup 0 --threads 1 --log-every 0 --json ";
  const std::string here = temp_path("here") + ".json", there = temp_path("there") + ".json";
  const auto local = run_command(kBin + common + here + " --device cpu --backend onednn");
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const auto remote = run_command(kSecretEnv + kBin + common + there + " --device remote:127.0.0.1:" +
                                  std::to_string(server.port) + ",fraction=0.5");
  ASSERT_EQ(remote.exit_code, 0) << remote.output;
  EXPECT_NE(remote.output.find("(EMULATED)"), std::string::npos) << remote.output;
  EXPECT_NE(remote.output.find(":" + std::to_string(server.port) + " over tcp (from "), std::string::npos) << remote.output;
  EXPECT_NE(remote.output.find("# remote traffic per training step"), std::string::npos) << remote.output;
  const json a = read_json(here), b = read_json(there);
  EXPECT_EQ(a["summary"]["final_hashes"], b["summary"]["final_hashes"]);
  EXPECT_EQ(b["meta"]["backend"], "remote");
  EXPECT_TRUE(b["meta"]["remote"]["device"]["emulated"].get<bool>());
  EXPECT_EQ(b["meta"]["remote"]["link"]["transport"], "tcp");
  EXPECT_EQ(b["meta"]["remote"]["per_step"]["round_trips"], 5);
  const std::string log = server.finish();
  EXPECT_NE(log.find("EMULATED GPU"), std::string::npos) << log;
  EXPECT_NE(log.find("left after"), std::string::npos) << log;
}

// Inference on the remote device: the memory is the server's, so it is null here, not zero.
TEST(RemoteCli, InferOnARemoteDeviceDoesNotReportItsMemoryAsZero) {
  Server server(1);
  ASSERT_GT(server.port, 0);
  const std::string out = temp_path("infer") + ".json";
  const auto r = run_command(kSecretEnv + kBin + " infer --model lenet --max-batch 2 --min-queries 0 --threads 1 "
                             "--scenarios offline --min-duration 0.1 --json " + out + " --device remote:127.0.0.1:" +
                             std::to_string(server.port));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json doc = read_json(out);
  EXPECT_TRUE(doc["memory"]["on_the_device_server"].get<bool>());
  for (const char* k : {"inference_mib", "training_mib", "inference_over_training", "served_sizes_mib"})
    EXPECT_TRUE(doc["memory"][k].is_null()) << k << ": " << doc["memory"].dump();
  EXPECT_TRUE(doc["device"]["memory_mib"].is_null()) << doc["device"].dump();
  server.finish();
}

// Two ranks, each with its half of one device server, allreduce over our ring as local ranks do.
TEST(RemoteCli, TwoRanksOnOneServerRingAsLocalRanksDo) {
  Server server(2);
  ASSERT_GT(server.port, 0);
  const std::string common = " train --model lenet --batch 4 --steps 2 --warmup 0 --threads 1 --ranks 2 --log-every 0 --json ";
  const std::string here = temp_path("here2") + ".json", there = temp_path("there2") + ".json";
  const auto local = run_command(kBin + common + here + " --device cpu --backend onednn");
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const auto remote = run_command(kSecretEnv + kBin + common + there + " --device remote:127.0.0.1:" +
                                  std::to_string(server.port) + ",fraction=0.5");
  ASSERT_EQ(remote.exit_code, 0) << remote.output;
  EXPECT_EQ(read_json(here)["summary"]["final_hashes"], read_json(there)["summary"]["final_hashes"]);
  const std::string log = server.finish();
  EXPECT_NE(log.find("served after 2 client(s)"), std::string::npos) << log;
}

TEST(RemoteCli, BadSpecsAndAMissingSecretAreClearErrors) {
  const std::string train = kBin + " train --model lenet --steps 1 --device ";
  auto r = run_command(train + "remote:127.0.0.1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no HOST:PORT"), std::string::npos) << r.output;
  r = run_command(train + "remote:127.0.0.1:9,fraction=2");
  EXPECT_NE(r.output.find("fraction must be in (0, 1]"), std::string::npos) << r.output;
  r = run_command("env -u RINGBENCH_SECRET " + train + "remote:127.0.0.1:9");
  EXPECT_NE(r.output.find("needs the device server's secret"), std::string::npos) << r.output;
  r = run_command(train + "remote:127.0.0.1:9,transport=ib");
  EXPECT_NE(r.output.find("transport must be tcp or verbs"), std::string::npos) << r.output;
  r = run_command(train + "remote:127.0.0.1:9,colour=red");
  EXPECT_NE(r.output.find("the options are fraction=F and transport=tcp|verbs"), std::string::npos) << r.output;
  if (!std::filesystem::exists("/sys/class/infiniband")) {  // no RDMA device: said at once, no fallback to tcp
    r = run_command(kSecretEnv + train + "remote:127.0.0.1:9,transport=verbs");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("transport=verbs: no RDMA device on this host"), std::string::npos) << r.output;
    r = run_command(kSecretEnv + kBin + " device-server --clients 1 --transport verbs");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("--transport verbs: no RDMA device on this host"), std::string::npos) << r.output;
  }
  r = run_command(kSecretEnv + kBin + " device-server --clients 1 --transport udp");
  EXPECT_NE(r.output.find("--transport udp: not tcp or verbs"), std::string::npos) << r.output;
  r = run_command("env -u RINGBENCH_SECRET " + kBin + " device-server --clients 1");
  EXPECT_NE(r.output.find("needs the job's secret"), std::string::npos) << r.output;
  // The server keeps buffers in host memory: a GPU backend would be handed host pointers.
  r = run_command(kSecretEnv + kBin + " device-server --clients 1 --backend cudnn");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("host memory only"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ringbench
