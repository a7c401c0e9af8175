// A sweep config's `remote:` section: VMware's Bitfusion benchmark (issue 41) on this cluster,
// with `ringbench device-server` and `train --device remote:...`. One model trains in four
// setups, each a point:
//   local_device  the same training on the device's node without a server: the normalisation
//   loopback      VMware's "local": client and server on the device's node, over loopback
//   partial       "local partials": k clients there, each with 1/k of the device's memory
//   link          "remote": the client on node 0, the server on node 1, over the device link,
//                 at each configured rate and one-way latency (the server's shaping proxy)
// Without a GPU the device is the CPU backend standing in for one: every point says emulated.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ringbench {

class YamlReader;
struct SweepPoint;
class Executor;
struct LaunchOutcome;

struct RemoteLink {
  double gbps = 0;          // 0: no rate limit beyond the cluster's own link
  double latency_us = -1;   // -1: cluster.latency_us
};

struct RemoteModel {
  std::string model;
  int batch = 8;
  int image_size = 0;
};

struct RemoteSweep {
  std::vector<RemoteModel> models;  // `model` (one) or `models`; each runs every setup
  int warmup = 2, steps = 10;
  int threads = 0;                     // the device's threads (0: the cluster's CPUs per node)
  std::vector<int> clients{2, 4};      // local partials: k clients sharing the server
  std::vector<std::string> transports{"tcp"};  // the device link's; verbs runs on unshaped links only
  std::vector<RemoteLink> links;       // remote over the link, one point per entry and transport
  std::string policy = "best_effort";  // how the server shares its time among clients
};

// Parses and validates the section; `latency_us` is cluster.latency_us (links without their
// own); `cluster_gbps` the emulated cluster's link rate (0: none), which a link may not exceed.
RemoteSweep parse_remote(const YamlReader& r, double latency_us, double cluster_gbps);
nlohmann::json to_json(const RemoteSweep& s);

// The section's points of one repeat, per model: local_device, loopback, the partials, the links.
void for_each_remote_point(const RemoteSweep& s, int repeat, const std::function<void(const SweepPoint&)>& visit);

// Why this build cannot run point p ("" when it can).
std::string remote_unavailable(const SweepPoint& p);

// Runs a remote point on `exec`'s nodes: the device server (node 1 for a link, else node 0 where
// the cluster has one node) and its clients, or the local device run. The clients' JSONs are
// merged into json_path (merge_remote_results).
LaunchOutcome run_remote_point(const RemoteSweep& s, const SweepPoint& p, uint64_t seed, Executor& exec,
                               const std::string& json_path, const std::string& log_base, double timeout_s,
                               const std::atomic<bool>* stop, std::vector<std::string>* command);

// Who process k of a remote point is ("the device server", "client 1", "the local device run")
// and its log, for a failure's message.
std::pair<std::string, std::string> remote_process(const SweepPoint& p, size_t k, const std::string& log_base);

// The clients' `train --json` documents as one: the first client's meta, the total img/s summed
// over the clients, each client's summary under "clients".
nlohmann::json merge_remote_results(const std::vector<nlohmann::json>& clients);

// What a remote point's raw record keeps of that document (runner/report/report.h: "remote").
nlohmann::json remote_subset(const SweepPoint& p, const nlohmann::json& doc);

// tc's rate ("10gbit", "100mbit") in Gbit/s.
double tc_rate_gbps(const std::string& rate);

}  // namespace ringbench
