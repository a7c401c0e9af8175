#include "runner/cluster/cluster.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <thread>

#include "base/errors.h"
#include "base/text.h"
#include "collectives/net.h"
#include "base/subprocess.h"

namespace ringbench {
namespace {

constexpr const char* kNetnsDir = "/run/netns";
constexpr const char* kIface = "eth0";
constexpr const char* kBridge = "br0";
constexpr const char* kPersistent = "ringbench";
constexpr const char* kLocalHint = "or use cluster type local (loopback)";

using Argv = std::vector<std::string>;

// ---------------------------------------------------------------- running ip and tc

// Resolved once, in the parent: the spawned child only execs.
const std::string& tool_path(const std::string& name) {
  static const std::vector<std::string> sbin{"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
  static const std::string ip = find_on_path("ip", sbin);
  static const std::string tc = find_on_path("tc", sbin);
  return name == "tc" ? tc : ip;
}

std::string shown(const Argv& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Runs `ip ...` or `tc ...` without a shell.
ProcessOutput run_tool(const Argv& argv) {
  const std::string& path = tool_path(argv.at(0));
  if (path.empty()) {
    ProcessOutput o;
    o.status = 127;
    o.err = argv[0] + ": not found (install iproute2)";
    return o;
  }
  return run_process(path, argv);
}

Error command_error(const Argv& argv, const ProcessOutput& o) {
  return Error("emulated cluster: `" + shown(argv) + "` failed: " + o.message());
}

// Runs the command; throws Error naming it and quoting its stderr when it fails.
std::string must(const Argv& argv) {
  ProcessOutput o = run_tool(argv);
  if (!o.ok()) throw command_error(argv, o);
  return o.out;
}

// ---------------------------------------------------------------- namespaces

std::vector<std::string> list_netns() {
  std::vector<std::string> names;
  DIR* d = ::opendir(kNetnsDir);
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string netns_path(const std::string& name) { return std::string(kNetnsDir) + "/" + name; }

bool netns_exists(const std::string& name) {
  struct stat st{};
  return ::stat(netns_path(name).c_str(), &st) == 0;
}

int open_netns(const std::string& name) {
  int fd = ::open(netns_path(name).c_str(), O_RDONLY | O_CLOEXEC);
  check_errno(fd >= 0, "emulated cluster: cannot open " + netns_path(name));
  return fd;
}

// Never throws: used by down() and cleanup paths.
bool delete_netns(const std::string& name) {
  Argv argv = {"ip", "netns", "delete", name};
  ProcessOutput o = run_tool(argv);
  if (o.ok()) return true;
  std::cerr << "ringbench: `" << shown(argv) << "` failed: " << o.message() << "\n";
  return false;
}

bool all_digits(const std::string& s, size_t from) {
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(from), s.end(),
                     [](unsigned char c) { return std::isdigit(c); });
}

// Namespaces of the cluster with this prefix: "<prefix>-n<k>" and "<prefix>-sw".
std::vector<std::string> cluster_netns(const std::string& prefix) {
  std::vector<std::string> found;
  std::string p = prefix + "-";
  for (const auto& n : list_netns()) {
    if (n.compare(0, p.size(), p) != 0) continue;
    std::string rest = n.substr(p.size());
    bool node = rest.size() > 1 && rest[0] == 'n' && all_digits(rest, 1);
    if (node || rest == "sw") found.push_back(n);
  }
  return found;
}

// The pid of a sweep's namespace name ("rb<pid>-n3", "rb<pid>-sw", "rb<pid>-probe0"), or -1 for
// any other name.
long owner_pid(const std::string& name) {
  const size_t dash = name.find('-');
  if (name.rfind("rb", 0) != 0 || dash == std::string::npos || dash < 3 || dash > 11) return -1;
  const std::string pid = name.substr(2, dash - 2), rest = name.substr(dash + 1);
  const bool node = rest.size() > 1 && rest[0] == 'n' && all_digits(rest, 1);
  const bool probe = rest.rfind("probe", 0) == 0 && all_digits(rest, 5);
  if (!all_digits(pid, 0) || !(node || probe || rest == "sw")) return -1;
  return std::stol(pid);
}

bool pid_alive(long pid) {
  return pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

// Runs f() on a fresh thread that first joins the network namespace `ns_fd`: sockets it
// creates stay in that namespace; this thread's namespace is untouched.
template <class F>
auto in_netns(int ns_fd, F&& f) -> decltype(f()) {
  std::packaged_task<decltype(f())()> task([&] {
    check_errno(::setns(ns_fd, CLONE_NEWNET) == 0, "setns");
    return f();
  });
  auto result = task.get_future();
  std::thread(std::move(task)).join();
  return result.get();
}

// ---------------------------------------------------------------- rates and addresses

// Bits per second of a tc rate ("100mbit", "1gbit", "10gbps"); 0 when it is not one.
double rate_bps(const std::string& rate) {
  static const std::pair<const char*, double> units[] = {
      {"", 1},           {"bit", 1},        {"kbit", 1e3},     {"mbit", 1e6},     {"gbit", 1e9},
      {"tbit", 1e12},    {"kibit", 0x1p10}, {"mibit", 0x1p20}, {"gibit", 0x1p30}, {"tibit", 0x1p40},
      {"bps", 8},        {"kbps", 8e3},     {"mbps", 8e6},     {"gbps", 8e9},     {"tbps", 8e12},
      {"kibps", 0x1p13}, {"mibps", 0x1p23}, {"gibps", 0x1p33}, {"tibps", 0x1p43}};
  size_t digits = 0, dots = 0, i = 0;
  for (; i < rate.size() && (std::isdigit(static_cast<unsigned char>(rate[i])) || rate[i] == '.'); ++i)
    rate[i] == '.' ? ++dots : ++digits;
  if (digits == 0 || dots > 1 || rate[0] == '.' || rate[i - 1] == '.') return 0;
  const std::string unit = lower(rate.substr(i));
  for (const auto& [name, scale] : units)
    if (unit == name) return std::stod(rate.substr(0, i)) * scale;
  return 0;
}

// htb's burst must cover what the link sends in a timer tick or fast links fall short of their
// rate: 1 ms worth, at least 16 KiB, at most 16 MiB.
long long burst_bytes(double bps) {
  return std::clamp(static_cast<long long>(bps / 8 / 1000), 16LL << 10, 16LL << 20);
}

// The word after `key` in `text` (up to a space, '/' or newline), or "".
std::string word_after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return text.substr(from, text.find_first_of(" /\n", from) - from);
}

// First IPv4 address (without /len) of `dev` in namespace `ns`, or "".
std::string netns_ipv4(const std::string& ns, const std::string& dev) {
  ProcessOutput o = run_tool({"ip", "-n", ns, "-4", "-o", "addr", "show", "dev", dev});
  return o.ok() ? word_after(o.out, " inet ") : "";
}

// The htb rate on `dev` in namespace `ns` as tc prints it, lower-cased ("1gbit"), or "".
std::string netns_rate(const std::string& ns, const std::string& dev) {
  ProcessOutput o = run_tool({"tc", "-n", ns, "class", "show", "dev", dev});
  return o.ok() && o.out.find("class htb") != std::string::npos ? lower(word_after(o.out, " rate ")) : "";
}

void check_prefix(const std::string& prefix) {
  bool ok = !prefix.empty() && prefix.size() <= 64 &&
            std::all_of(prefix.begin(), prefix.end(), [](unsigned char c) {
              return std::isalnum(c) || c == '-' || c == '_' || c == '.';
            });
  if (!ok) throw Error("emulated cluster: bad prefix '" + prefix + "': use letters, digits, '-', '_' or '.'");
}

// Removes dead sweeps' namespaces, saying so on stderr.
void remove_leftovers_noisily() {
  for (const auto& name : leftover_namespaces(true))
    std::cerr << "ringbench: removed leftover namespace " << name
              << " of a sweep that is gone (pid " << owner_pid(name) << ")\n";
}

bool has_net_admin_caps() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    const unsigned long long need = (1ULL << 12) | (1ULL << 21);  // CAP_NET_ADMIN, CAP_SYS_ADMIN
    return (caps & need) == need;
  }
  return ::geteuid() == 0;
}

}  // namespace

// ---------------------------------------------------------------- the cluster

struct EmulatedCluster::State {
  ClusterSpec spec;
  std::vector<std::string> created;  // namespaces down() removes, in creation order
  std::vector<int> node_fds;
  int switch_fd = -1;
  bool owned = true;  // the destructor calls down()

  ~State() { close_fds(); }

  std::string node_ns(int k) const { return spec.prefix + "-n" + std::to_string(k); }
  std::string switch_ns() const { return spec.prefix + "-sw"; }
  std::string node_addr(int k) const { return spec.subnet + "." + std::to_string(k + 1); }
  std::string switch_addr() const { return spec.subnet + ".254"; }

  void close_fds() {
    for (int& fd : node_fds) close_fd(fd);
    close_fd(switch_fd);
  }

  void open_fds() {
    node_fds.assign(static_cast<size_t>(spec.nodes), -1);
    for (int k = 0; k < spec.nodes; ++k) node_fds[static_cast<size_t>(k)] = open_netns(node_ns(k));
    switch_fd = open_netns(switch_ns());
  }

  void add_netns(const std::string& name) {
    must({"ip", "netns", "add", name});
    created.push_back(name);
  }

  // One htb class at the link rate; every packet goes to it (default 10). The quantum is given
  // so htb does not derive one from rate/r2q and warn that it is big.
  void limit(const std::string& ns, const std::string& dev) const {
    std::string burst = std::to_string(burst_bytes(rate_bps(spec.link)));
    must({"tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"});
    must({"tc", "-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate",
          spec.link, "burst", burst, "cburst", burst, "quantum", "60000"});
  }

  void build() {
    const std::string sw = switch_ns();
    add_netns(sw);
    for (int k = 0; k < spec.nodes; ++k) add_netns(node_ns(k));
    must({"ip", "-n", sw, "link", "set", "lo", "up"});
    must({"ip", "-n", sw, "link", "add", kBridge, "type", "bridge"});
    must({"ip", "-n", sw, "addr", "add", switch_addr() + "/24", "dev", kBridge});
    must({"ip", "-n", sw, "link", "set", kBridge, "up"});
    for (int k = 0; k < spec.nodes; ++k) {
      const std::string ns = node_ns(k), port = "n" + std::to_string(k);
      // Created from inside the switch namespace with the peer placed straight into the node's:
      // no end ever exists in the host's namespace.
      must({"ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name", kIface, "netns", ns});
      must({"ip", "-n", sw, "link", "set", port, "master", kBridge});
      must({"ip", "-n", sw, "link", "set", port, "up"});
      must({"ip", "-n", ns, "addr", "add", node_addr(k) + "/24", "dev", kIface});
      must({"ip", "-n", ns, "link", "set", kIface, "up"});
      must({"ip", "-n", ns, "link", "set", "lo", "up"});
      limit(ns, kIface);  // node -> switch
      limit(sw, port);    // switch -> node
    }
    open_fds();
    verify();
  }

  // Node 0 opens a TCP connection to the last node (the switch when alone) and sends a byte.
  void verify() const {
    const bool alone = spec.nodes == 1;
    const int to_fd = alone ? switch_fd : node_fds.back();
    const std::string to = alone ? switch_addr() : node_addr(spec.nodes - 1);
    const std::string what = "emulated cluster: node 0 (" + node_ns(0) + ", " + node_addr(0) +
                             ") cannot reach " + (alone ? switch_ns() : node_ns(spec.nodes - 1)) +
                             " (" + to + ") over TCP: ";
    const auto deadline = net::Clock::now() + std::chrono::seconds(10);
    int port = 0, lfd = -1, cfd = -1, afd = -1;
    try {
      lfd = in_netns(to_fd, [&] { return net::listen_tcp(to, 0, &port); });
      cfd = in_netns(node_fds[0], [&] { return net::connect_tcp(to, port, deadline); });
      pollfd p = {lfd, POLLIN, 0};
      if (::poll(&p, 1, 5000) == 1) afd = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      check_errno(afd >= 0, "accept");
      char byte = 'r';
      if (!net::write_all(cfd, &byte, 1, deadline) || !net::read_all(afd, &byte, 1, deadline))
        throw Error("no byte came through before the timeout");
    } catch (const std::exception& e) {
      close_fd(lfd), close_fd(cfd), close_fd(afd);
      throw Error(what + e.what());
    }
    close_fd(lfd), close_fd(cfd), close_fd(afd);
  }

  // Closes the fds first: an open fd would keep a deleted namespace (and its veths) alive.
  void teardown() {
    close_fds();
    for (auto it = created.rbegin(); it != created.rend(); ++it) delete_netns(*it);
    created.clear();
  }
};

std::unique_ptr<EmulatedCluster> EmulatedCluster::up(const ClusterSpec& spec_in) {
  ClusterSpec spec = spec_in;
  if (spec.prefix.empty()) spec.prefix = "rb" + std::to_string(::getpid());
  check_prefix(spec.prefix);
  if (spec.nodes < 1 || spec.nodes > 253)
    throw Error("emulated cluster: " + std::to_string(spec.nodes) + " nodes: a cluster has 1 to 253");
  if (rate_bps(spec.link) <= 0)
    throw Error("emulated cluster: bad link rate '" + spec.link +
                "': use tc rate syntax, e.g. 100mbit, 1gbit, 10gbit, 25gbit");
  remove_leftovers_noisily();
  if (!cluster_netns(spec.prefix).empty())
    throw Error("emulated cluster: namespaces " + spec.prefix + "-* already exist (" +
                shown(cluster_netns(spec.prefix)) + "): remove them first");
  std::unique_ptr<EmulatedCluster> c(new EmulatedCluster);
  c->s_ = std::make_unique<State>();
  c->s_->spec = spec;
  try {
    c->s_->build();
  } catch (...) {
    c->down();
    throw;
  }
  return c;
}

// An attached cluster is not owned: its destructor leaves it (an explicit down() removes it).
std::unique_ptr<EmulatedCluster> EmulatedCluster::attach(const std::string& prefix) {
  check_prefix(prefix);
  ClusterSpec spec;
  spec.prefix = prefix;
  spec.nodes = 0;
  while (netns_exists(prefix + "-n" + std::to_string(spec.nodes))) ++spec.nodes;
  if (spec.nodes == 0 || !netns_exists(prefix + "-sw"))
    throw Error("no emulated cluster named " + prefix + "-*: run `ringbench cluster up` first");
  std::string addr = netns_ipv4(prefix + "-n0", kIface);
  if (addr.empty())
    throw Error("emulated cluster " + prefix + ": " + prefix + "-n0 has no IPv4 address on " +
                kIface + ": `ringbench cluster down`, then up again");
  spec.subnet = addr.substr(0, addr.rfind('.'));
  spec.link = netns_rate(prefix + "-n0", kIface);
  if (spec.link.empty()) spec.link = "unknown";
  std::unique_ptr<EmulatedCluster> c(new EmulatedCluster);
  c->s_ = std::make_unique<State>();
  c->s_->spec = spec;
  c->s_->owned = false;
  c->s_->created = cluster_netns(prefix);
  c->s_->open_fds();
  return c;
}

EmulatedCluster::~EmulatedCluster() {
  if (s_ && s_->owned) down();
}

void EmulatedCluster::down() {
  try {
    if (s_) s_->teardown();
  } catch (const std::exception& e) {
    std::cerr << "ringbench: removing the emulated cluster: " << e.what() << "\n";
  }
}

void EmulatedCluster::release() { s_->owned = false; }

int EmulatedCluster::nodes() const { return s_->spec.nodes; }
const ClusterSpec& EmulatedCluster::spec() const { return s_->spec; }
std::string EmulatedCluster::node_ns(int node) const { return s_->node_ns(node); }
std::string EmulatedCluster::node_addr(int node) const { return s_->node_addr(node); }
std::string EmulatedCluster::node_iface() const { return kIface; }
std::string EmulatedCluster::switch_ns() const { return s_->switch_ns(); }
std::string EmulatedCluster::switch_addr() const { return s_->switch_addr(); }

int EmulatedCluster::node_ns_fd(int node) const {
  if (node < 0 || node >= s_->spec.nodes)
    throw Error("emulated cluster: no node " + std::to_string(node) + " (it has " +
                std::to_string(s_->spec.nodes) + ")");
  return s_->node_fds.empty() ? -1 : s_->node_fds[static_cast<size_t>(node)];
}

int EmulatedCluster::switch_ns_fd() const { return s_->switch_fd; }

nlohmann::json EmulatedCluster::describe() const {
  const State& s = *s_;
  nlohmann::json nodes = nlohmann::json::array(), qdiscs = nlohmann::json::array(),
                 switch_qdiscs = nlohmann::json::array();
  const bool live = s.switch_fd >= 0;
  for (int k = 0; k < s.spec.nodes; ++k) {
    nodes.push_back({{"ns", s.node_ns(k)}, {"addr", s.node_addr(k)}, {"iface", kIface}});
    if (!live) continue;
    ProcessOutput q = run_tool({"tc", "-n", s.node_ns(k), "-s", "qdisc", "show", "dev", kIface});
    qdiscs.push_back(q.ok() ? q.out : q.message());
    q = run_tool({"tc", "-n", s.switch_ns(), "-s", "qdisc", "show", "dev", "n" + std::to_string(k)});
    switch_qdiscs.push_back(q.ok() ? q.out : q.message());
  }
  return {{"type", "emulated"},
          {"prefix", s.spec.prefix},
          {"nodes", nodes},
          {"switch", {{"ns", s.switch_ns()}, {"addr", s.switch_addr()}, {"bridge", kBridge}}},
          {"link_rate", s.spec.link},
          {"qdiscs", qdiscs},
          {"switch_qdiscs", switch_qdiscs}};
}

// ---------------------------------------------------------------- free functions

bool can_emulate_cluster(std::string* why) {
  auto fail = [&](const std::string& msg) {
    if (why) *why = msg;
    return false;
  };
  if (!has_net_admin_caps())
    return fail(std::string("network namespaces need root (CAP_SYS_ADMIN, CAP_NET_ADMIN): run as root, ") +
                kLocalHint);
  if (tool_path("ip").empty() || tool_path("tc").empty())
    return fail(std::string("iproute2 (ip and tc) not found: apt-get install iproute2, ") + kLocalHint);
  static std::atomic<int> probes{0};
  const std::string ns = "rb" + std::to_string(::getpid()) + "-probe" + std::to_string(probes++);
  const std::pair<Argv, const char*> steps[] = {
      {{"ip", "netns", "add", ns}, "cannot create a network namespace"},
      {{"ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"}, "no veth pairs (modprobe veth)"},
      {{"ip", "-n", ns, "link", "add", "br0", "type", "bridge"}, "no bridges (modprobe bridge)"},
      {{"tc", "-n", ns, "qdisc", "add", "dev", "v0", "root", "handle", "1:", "htb", "default", "10"},
       "no htb qdisc (modprobe sch_htb)"},
  };
  std::string problem;
  bool created = false;
  for (const auto& [argv, what] : steps) {
    ProcessOutput o = run_tool(argv);
    if (!o.ok()) {
      // `ip -n` makes / a slave mount before it enters the namespace: where / is no mount point
      // (a chroot) that fails whatever the kernel has, and the step's own hint would mislead.
      const bool chroot = o.message().find("make-rslave") != std::string::npos;
      problem = (chroot ? std::string("`ip -n` cannot enter a namespace: / is not a mount point (in a chroot, "
                                      "`mount --bind ROOT ROOT` before entering it)")
                        : std::string(what)) +
                ": `" + shown(argv) + "` failed: " + o.message() + "; " + kLocalHint;
      break;
    }
    created = true;
  }
  if (created) run_tool({"ip", "netns", "delete", ns});
  if (!problem.empty()) return fail(problem);
  if (why) why->clear();
  return true;
}

std::vector<std::string> leftover_namespaces(bool remove) {
  std::vector<std::string> dead;
  for (const auto& name : list_netns()) {
    long pid = owner_pid(name);
    if (pid > 0 && !pid_alive(pid)) dead.push_back(name);
  }
  if (remove)
    for (const auto& name : dead) delete_netns(name);
  return dead;
}

namespace {

void print_cluster_up(const EmulatedCluster& c) {
  const auto& s = c.spec();
  std::cout << "emulated cluster '" << s.prefix << "' is up: " << s.nodes << " nodes on one switch, every link "
            << s.link << " each way (tc htb)\n";
  for (int k = 0; k < c.nodes(); ++k)
    std::cout << "  " << c.node_ns(k) << "  " << c.node_addr(k) << " on " << c.node_iface() << "\n";
  std::cout << "  " << c.switch_ns() << "  " << c.switch_addr() << " on " << kBridge << " (the switch)\n"
            << "run a command on a node:  ip netns exec " << c.node_ns(0) << " <command>\n"
            << "remove it:                ringbench cluster down\n";
}

int cluster_down() {
  std::vector<std::string> removed;
  for (const auto& name : cluster_netns(kPersistent))
    if (delete_netns(name)) removed.push_back(name);
  for (const auto& name : leftover_namespaces(true)) removed.push_back(name + " (leftover of pid " +
                                                                        std::to_string(owner_pid(name)) + ")");
  if (removed.empty()) std::cout << "no emulated cluster is up and no leftovers: nothing to remove\n";
  for (const auto& r : removed) std::cout << "removed namespace " << r << "\n";
  return 0;
}

int cluster_status() {
  std::vector<std::string> names = cluster_netns(kPersistent);
  for (const auto& n : list_netns())
    if (owner_pid(n) > 0) names.push_back(n);
  if (names.empty()) std::cout << "no emulated cluster is up (`ringbench cluster up` makes one)\n";
  for (const auto& n : names) {
    long pid = owner_pid(n);
    const bool sw = n.size() >= 3 && n.compare(n.size() - 3, 3, "-sw") == 0;
    const std::string dev = sw ? kBridge : kIface;
    std::string owner = pid < 0 ? "persistent (`ringbench cluster down` removes it)"
                        : pid_alive(pid) ? "sweep pid " + std::to_string(pid) + ", alive"
                                         : "sweep pid " + std::to_string(pid) + ", dead: a leftover";
    std::string addr = netns_ipv4(n, dev), rate = sw ? "" : netns_rate(n, dev);
    std::cout << n << "  " << (addr.empty() ? "-" : addr) << "  " << (rate.empty() ? "" : rate + "  ")
              << owner << "\n";
  }
  return 0;
}

}  // namespace

int run_cluster_cmd(const std::string& action, int nodes, const std::string& link) {
  if (action == "up") {
    remove_leftovers_noisily();
    if (!cluster_netns(kPersistent).empty())
      throw Error(std::string("emulated cluster '") + kPersistent + "' is already up; `ringbench cluster down` first");
    ClusterSpec spec;
    spec.nodes = nodes;
    spec.link = link;
    spec.prefix = kPersistent;
    auto c = EmulatedCluster::up(spec);
    c->release();
    print_cluster_up(*c);
    return 0;
  }
  if (action == "down") return cluster_down();
  if (action == "status") return cluster_status();
  throw Error("ringbench cluster: unknown action '" + action + "': use up, down or status");
}

}  // namespace ringbench
