// An emulated cluster on one machine: each node is a Linux network namespace with its own
// address on one L2 segment (a bridge in a "switch" namespace, one veth pair per node), every
// link rate-limited with tc htb in both directions. Nothing touches the host's own network.
//
// Names: a sweep's cluster is "rb<pid>-n<k>" (nodes) and "rb<pid>-sw" (switch), so a leftover
// of a crashed run (its pid no longer alive) is recognised and removed by the next up();
// `ringbench cluster up` makes a persistent one named "ringbench-n<k>" / "ringbench-sw" that
// stays until `ringbench cluster down`.
#pragma once

#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

namespace ringbench {

struct ClusterSpec {
  int nodes = 4;
  std::string link = "10gbit";      // tc rate syntax: 100mbit, 1gbit, 10gbit, 25gbit
  std::string prefix;                // "" = "rb<this pid>"; "ringbench" for `cluster up`
  std::string subnet = "10.77.0";    // node k gets <subnet>.<k+1>/24; the switch <subnet>.254
};

class EmulatedCluster {
 public:
  // Creates the namespaces, bridge, veths, addresses and qdiscs; removes dead leftovers first.
  // Throws Error with the failing command and its output (and undoes what it created).
  static std::unique_ptr<EmulatedCluster> up(const ClusterSpec& spec);
  // Attaches to an existing persistent cluster with this prefix (e.g. made by `cluster up`).
  static std::unique_ptr<EmulatedCluster> attach(const std::string& prefix);
  ~EmulatedCluster();  // down() unless release() was called
  void down();         // removes everything it created; idempotent; never throws
  void release();      // keep the namespaces after this object dies (`cluster up`)

  int nodes() const;
  const ClusterSpec& spec() const;
  std::string node_ns(int node) const;    // namespace name
  std::string node_addr(int node) const;  // IPv4 address of the node's interface
  std::string node_iface() const;         // interface name inside every node ("eth0")
  std::string switch_ns() const;
  std::string switch_addr() const;        // the bridge's address, reachable from every node
  // File descriptors (O_CLOEXEC) of the namespaces, opened at up(): pass to setns(fd,
  // CLONE_NEWNET) in a forked child before exec, or in a thread to open sockets there.
  int node_ns_fd(int node) const;
  int switch_ns_fd() const;
  // Namespaces, addresses, link rate and each qdisc as `tc -s qdisc` reports it (for env.json).
  nlohmann::json describe() const;

 private:
  EmulatedCluster() = default;
  struct State;
  std::unique_ptr<State> s_;
};

// Whether this process can create network namespaces (root with CAP_SYS_ADMIN and CAP_NET_ADMIN,
// iproute2 present, veth/bridge/htb usable); when not, *why says what is missing.
bool can_emulate_cluster(std::string* why);

// Namespaces left by sweeps whose process is gone ("rb<pid>-*" with a dead pid); removes them
// when `remove` and returns their names.
std::vector<std::string> leftover_namespaces(bool remove);

// `ringbench cluster up|down|status [--nodes N] [--link RATE]`.
int run_cluster_cmd(const std::string& action, int nodes, const std::string& link);

}  // namespace ringbench
