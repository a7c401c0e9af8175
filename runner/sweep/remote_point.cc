// Runs a remote point (runner/sweep/remote_sweep.h): the device server and its clients as
// processes on the cluster's nodes, or the training on the device itself.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "collectives/auth.h"
#include "collectives/net.h"
#include "runner/sweep/remote_sweep.h"
#include "runner/sweep/sweep_config.h"
#include "runner/sweep/sweep_exec.h"
#include "runner/analysis/format.h"

namespace ringbench {
namespace {

using json = nlohmann::json;

constexpr int kDeviceNode = 0, kClientNode = 0;  // loopback setups: all on the device's node
constexpr int kLinkDeviceNode = 1;              // link setups: the server on node 1, clients on node 0

// 1/k of the device, rounded down so that k of them never promise more than the whole.
std::string fraction_text(int clients) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6f", std::floor(1e6 / clients) / 1e6);
  return b;
}

// A port free on this machine now, for the point's device server (the clients start with it and
// retry their connection until it listens).
int free_port() {
  int port = 0;
  const int fd = net::listen_tcp("127.0.0.1", 0, &port);
  close(fd);
  return port;
}

std::vector<std::string> train_common(const RemoteSweep& s, const SweepPoint& p, uint64_t seed, int threads) {
  std::vector<std::string> a = {"train", "--model", p.model, "--batch", std::to_string(p.batch),
                                "--steps", std::to_string(s.steps), "--warmup", std::to_string(s.warmup),
                                "--seed", std::to_string(seed), "--threads", std::to_string(threads),
                                "--log-every", "0"};
  if (p.image_size) a.insert(a.end(), {"--image-size", std::to_string(p.image_size)});
  return a;
}

std::string client_json(const std::string& json_path, int k) { return json_path + ".client" + std::to_string(k); }

json read_json_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return json();
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str(), nullptr, false);
}

}  // namespace

LaunchOutcome run_remote_point(const RemoteSweep& s, const SweepPoint& p, uint64_t seed, Executor& exec,
                               const std::string& json_path, const std::string& log_base, double timeout_s,
                               const std::atomic<bool>* stop, std::vector<std::string>* command) {
  const int threads = s.threads > 0 ? s.threads : exec.cpus_per_node();
  const Millis timeout(static_cast<long>(timeout_s * 1000));
  const int device_node = p.setup == "link" ? kLinkDeviceNode : kDeviceNode;
  std::vector<PointProcess> procs;
  if (p.setup == "local_device") {  // the same training on the device's CPUs, no server
    PointProcess local{train_common(s, p, seed, threads), {}, device_node, log_base + ".local.log"};
    local.args.insert(local.args.end(), {"--device", "cpu", "--backend", "auto", "--json", client_json(json_path, 0)});
    procs.push_back(local);
  } else {
    const std::string secret = auth::to_hex(auth::new_secret()), port = std::to_string(free_port());
    const std::string addr = p.setup == "link" ? exec.node_addr(device_node) : "127.0.0.1";
    PointProcess server{{"device-server", "--addr", addr, "--port", port, "--threads", std::to_string(threads),
                         "--clients", std::to_string(p.clients), "--max-clients", std::to_string(p.clients),
                         "--policy", s.policy, "--timeout", report::num6(std::max(10.0, timeout_s / 2))},
                        {"RINGBENCH_SECRET=" + secret}, device_node, log_base + ".server.log"};
    if (p.setup == "link")
      server.args.insert(server.args.end(), {"--link-gbps", report::num6(p.link_gbps), "--link-latency-us", report::num6(p.latency_us)});
    if (p.transport == "verbs") server.args.insert(server.args.end(), {"--transport", "verbs"});
    procs.push_back(server);
    const std::string device = "remote:" + addr + ":" + port + ",fraction=" + fraction_text(p.clients) +
                               (p.transport == "verbs" ? ",transport=verbs" : "");
    for (int k = 0; k < p.clients; ++k) {
      PointProcess client{train_common(s, p, seed, threads), {"RINGBENCH_DEVICE_SECRET=" + secret},
                          p.setup == "link" ? 0 : kClientNode, log_base + ".client" + std::to_string(k) + ".log"};
      client.args.insert(client.args.end(), {"--device", device, "--json", client_json(json_path, k)});
      procs.push_back(client);
    }
  }
  *command = procs.back().args;
  const LaunchOutcome o = exec.run_processes(procs, timeout, stop);
  std::vector<json> docs;
  for (int k = 0; k < std::max(1, p.clients); ++k) {
    docs.push_back(read_json_file(client_json(json_path, k)));
    std::filesystem::remove(client_json(json_path, k));
  }
  const bool all = std::all_of(docs.begin(), docs.end(), [](const json& d) {
    return d.is_object() && d.contains("summary") && d.contains("meta");
  });
  if (all) {
    std::ofstream(json_path) << merge_remote_results(docs).dump();
  } else {
    for (const auto& d : docs)  // a client's error, where one wrote it
      if (d.is_object() && d.contains("error")) std::ofstream(json_path) << json{{"error", d["error"]}}.dump();
  }
  return o;
}

std::pair<std::string, std::string> remote_process(const SweepPoint& p, size_t k, const std::string& log_base) {
  if (p.setup == "local_device") return {"the local device run", log_base + ".local.log"};
  if (k == 0) return {"the device server", log_base + ".server.log"};
  return {"client " + std::to_string(k - 1), log_base + ".client" + std::to_string(k - 1) + ".log"};
}

}  // namespace ringbench
