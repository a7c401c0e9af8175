// The emulated cluster: network namespaces on one bridge, links rate-limited with tc htb.
// Needs root; every test skips with the reason otherwise. The fixture removes whatever a test
// may have left (this process's rb<pid>-* namespaces, its fake leftovers, the persistent
// cluster when the test made it), so a failing test leaves nothing behind.
#include "runner/cluster/cluster.h"

#include <dirent.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/errors.h"
#include "collectives/net.h"
#include "tests/run_command.h"

namespace ringbench {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> netns_names() {
  std::vector<std::string> names;
  if (DIR* d = ::opendir("/run/netns")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool netns_exists(const std::string& name) {
  auto n = netns_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

std::vector<std::string> netns_with_prefix(const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& n : netns_names())
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  return out;
}

std::string my_prefix() { return "rb" + std::to_string(::getpid()) + "-"; }

// Output of a shell command (test-only convenience; the library never uses a shell).
std::string sh(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen((cmd + " 2>&1").c_str(), "r")) {
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

void delete_netns(const std::string& name) { sh("ip netns delete " + name); }

// `f` throws an Error that says `part`.
::testing::AssertionResult throws_saying(const std::function<void()>& f, const std::string& part) {
  try {
    f();
  } catch (const Error& e) {
    if (std::string(e.what()).find(part) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the error does not say '" << part << "': " << e.what();
  }
  return ::testing::AssertionFailure() << "no error (expected one saying '" << part << "')";
}

// Runs `ringbench cluster <action>` in this process, which must succeed; returns what it printed.
std::string cluster_cmd_output(const std::string& action, int nodes = 0, const std::string& link = "") {
  ::testing::internal::CaptureStdout();
  const int rc = run_cluster_cmd(action, nodes, link);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << out;
  return out;
}

// A pid no process has: the leftover detector must call its namespaces dead.
long dead_pid() {
  for (long pid = 999999;; ++pid)
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return pid;
}

std::set<std::string> host_interfaces() {
  std::set<std::string> names;
  if (struct if_nameindex* list = ::if_nameindex()) {
    for (struct if_nameindex* i = list; i->if_index; ++i) names.insert(i->if_name);
    ::if_freenameindex(list);
  }
  return names;
}

// Runs f() on a thread that has joined the namespace `ns_fd` (sockets stay where created).
template <class F>
auto in_netns(int ns_fd, F f) -> decltype(f()) {
  std::packaged_task<decltype(f())()> task([&] {
    if (::setns(ns_fd, CLONE_NEWNET) != 0) throw Error("setns failed");
    return f();
  });
  auto result = task.get_future();
  std::thread(std::move(task)).join();
  return result.get();
}

// Sends `bytes` over TCP from node `from` to node `to`; returns the seconds from the connect
// to the last byte received.
double transfer(const EmulatedCluster& c, int from, int to, size_t bytes) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  const std::string addr = c.node_addr(to);
  int port = 0;
  const int lfd = in_netns(c.node_ns_fd(to), [&] { return net::listen_tcp(addr, 0, &port); });
  const auto start = Clock::now();
  std::thread sender([&] {
    int fd = in_netns(c.node_ns_fd(from), [&] { return net::connect_tcp(addr, port, deadline); });
    std::vector<char> data(bytes, 'x');
    net::write_all(fd, data.data(), data.size(), deadline);
    ::close(fd);
  });
  pollfd p = {lfd, POLLIN, 0};
  int afd = ::poll(&p, 1, 30000) == 1 ? ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK) : -1;
  std::vector<char> got(bytes);
  bool ok = afd >= 0 && net::read_all(afd, got.data(), got.size(), deadline);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  sender.join();
  if (afd >= 0) ::close(afd);
  ::close(lfd);
  if (!ok) throw Error("transfer from node " + std::to_string(from) + " did not arrive");
  return seconds;
}

// Bytes the first qdisc in `tc -s qdisc show` output says it sent.
long long sent_bytes(const std::string& tc_stats) {
  const size_t at = tc_stats.find("Sent ");
  return at == std::string::npos ? -1 : std::atoll(tc_stats.c_str() + at + 5);
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!can_emulate_cluster(&why)) GTEST_SKIP() << why;
  }

  void TearDown() override {
    for (const auto& n : netns_with_prefix(my_prefix())) delete_netns(n);
    for (const auto& n : fakes_) delete_netns(n);
    if (made_persistent_)
      for (const auto& n : netns_with_prefix("ringbench-")) delete_netns(n);
  }

  // A namespace named like a sweep's of a process that is gone.
  std::string make_fake_leftover(const std::string& suffix) {
    std::string name = "rb" + std::to_string(dead_pid()) + "-" + suffix;
    fakes_.push_back(name);
    sh("ip netns add " + name);
    EXPECT_TRUE(netns_exists(name)) << name;
    return name;
  }

  std::vector<std::string> fakes_;
  bool made_persistent_ = false;
};

TEST_F(ClusterTest, UpMakesNodesWithAddressesAndTouchesNotTheHost) {
  const auto host_before = host_interfaces();
  auto c = EmulatedCluster::up({3, "100mbit", "", "10.77.0"});
  const std::string p = my_prefix();
  ASSERT_EQ(c->nodes(), 3);
  EXPECT_EQ(c->spec().prefix + "-", p);
  EXPECT_EQ(c->node_iface(), "eth0");
  EXPECT_EQ(c->switch_ns(), p + "sw");
  EXPECT_EQ(c->switch_addr(), "10.77.0.254");
  EXPECT_TRUE(netns_exists(p + "sw"));
  EXPECT_GE(c->switch_ns_fd(), 0);
  for (int k = 0; k < 3; ++k) {
    const std::string ns = p + "n" + std::to_string(k), addr = "10.77.0." + std::to_string(k + 1);
    EXPECT_EQ(c->node_ns(k), ns);
    EXPECT_EQ(c->node_addr(k), addr);
    EXPECT_TRUE(netns_exists(ns));
    EXPECT_GE(c->node_ns_fd(k), 0);
    EXPECT_NE(sh("ip -n " + ns + " -4 -o addr show dev eth0").find("inet " + addr + "/24"), std::string::npos);
    EXPECT_NE(sh("tc -n " + ns + " class show dev eth0").find("rate 100Mbit"), std::string::npos);
    EXPECT_NE(sh("tc -n " + p + "sw class show dev n" + std::to_string(k)).find("rate 100Mbit"), std::string::npos);
  }
  EXPECT_THROW(c->node_ns_fd(3), Error);
  EXPECT_GT(transfer(*c, 0, 2, 1000), 0);
  EXPECT_GT(transfer(*c, 2, 1, 1000), 0);
  EXPECT_EQ(host_interfaces(), host_before) << "the host's interfaces changed";
  // Our own namespaces belong to a live process: not leftovers.
  for (const auto& n : leftover_namespaces(false)) EXPECT_NE(n.rfind(p, 0), 0u) << n;

  const auto j = c->describe();
  EXPECT_EQ(j["type"], "emulated");
  EXPECT_EQ(j["link_rate"], "100mbit");
  EXPECT_EQ(j["switch"]["ns"], p + "sw");
  EXPECT_EQ(j["switch"]["addr"], "10.77.0.254");
  EXPECT_EQ(j["switch"]["bridge"], "br0");
  ASSERT_EQ(j["nodes"].size(), 3u);
  ASSERT_EQ(j["qdiscs"].size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(j["nodes"][k]["ns"], c->node_ns(k));
    EXPECT_EQ(j["nodes"][k]["addr"], c->node_addr(k));
    EXPECT_EQ(j["nodes"][k]["iface"], "eth0");
    EXPECT_NE(j["qdiscs"][k].get<std::string>().find("qdisc htb 1:"), std::string::npos) << j["qdiscs"][k];
  }
}

// A node's eth0 is a veth, whose ethtool speed is a placeholder (10000 on recent kernels), not
// its tc rate: a rank there must say the link's speed is unknown, whether it joined the namespace
// with setns() (sysfs still the host's) or runs under `ip netns exec` (sysfs the namespace's).
TEST_F(ClusterTest, ANodesLinkSpeedIsUnknownNotTheVethsPlaceholder) {
  auto c = EmulatedCluster::up({2, "100mbit", "", "10.77.0"});
  const std::string ns = c->node_ns(0);
  std::printf("sysfs speed of %s's eth0: %s", ns.c_str(), sh("ip netns exec " + ns + " cat /sys/class/net/eth0/speed").c_str());
  EXPECT_EQ(in_netns(c->node_ns_fd(0), [] { return net::iface_speed_gbps("eth0"); }), 0.0);
  const auto r = testing::run_command("ip netns exec " + ns + " " + testing::ringbench_bin() +
                                      " allreduce --ranks 2 --iface eth0 -b 1K -e 1K -n 1 -w 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("iface=eth0 link_gbps=unknown"), std::string::npos) << r.output;
}

TEST_F(ClusterTest, LinkRateIsEnforcedInBothQdiscs) {
  const size_t bytes = 4 << 20;
  const double theory = static_cast<double>(bytes) / 12.5e6;  // 100 Mbit/s = 12.5 MB/s
  double slow = 0;
  {
    auto c = EmulatedCluster::up({2, "100mbit", "", "10.77.0"});
    slow = transfer(*c, 0, 1, bytes);
    const auto j = c->describe();
    // Both the node's egress and the switch's egress towards node 1 carried the data.
    EXPECT_GE(sent_bytes(j["qdiscs"][0]), static_cast<long long>(bytes)) << j["qdiscs"][0];
    EXPECT_GE(sent_bytes(j["switch_qdiscs"][1]), static_cast<long long>(bytes)) << j["switch_qdiscs"][1];
  }
  std::printf("4 MiB at 100mbit: %.3f s (theory %.3f s)\n", slow, theory);
  EXPECT_GE(slow, 0.7 * theory) << "the 100mbit limit did not hold";

  // 10gbit: no lower bound to assert (and no upper one: the machine is shared); it must work.
  auto fast = EmulatedCluster::up({2, "10gbit", "", "10.77.0"});
  std::printf("4 MiB at 10gbit: %.3f s\n", transfer(*fast, 0, 1, bytes));
}

TEST_F(ClusterTest, DownRemovesEverythingAndIsIdempotent) {
  auto c = EmulatedCluster::up({2, "1gbit", "", "10.77.0"});
  EXPECT_EQ(netns_with_prefix(my_prefix()).size(), 3u);
  c->down();
  EXPECT_TRUE(netns_with_prefix(my_prefix()).empty());
  EXPECT_EQ(c->node_ns_fd(0), -1);
  EXPECT_EQ(c->switch_ns_fd(), -1);
  c->down();
  EXPECT_TRUE(netns_with_prefix(my_prefix()).empty());
  EXPECT_EQ(c->describe()["nodes"].size(), 2u);
}

TEST_F(ClusterTest, DestructorRemovesEverything) {
  { auto c = EmulatedCluster::up({2, "1gbit", "", "10.77.0"}); }
  EXPECT_TRUE(netns_with_prefix(my_prefix()).empty());
  // Twice in a row with the same prefix: nothing of the first one is in the way.
  { auto c = EmulatedCluster::up({1, "1gbit", "", "10.77.0"}); }
  EXPECT_TRUE(netns_with_prefix(my_prefix()).empty());
}

TEST_F(ClusterTest, SamePrefixTwiceIsRefusedAndTheFirstStays) {
  auto c = EmulatedCluster::up({2, "1gbit", "", "10.77.0"});
  EXPECT_TRUE(throws_saying([] { EmulatedCluster::up({2, "1gbit", "", "10.88.0"}); }, "already exist"));
  EXPECT_EQ(netns_with_prefix(my_prefix()).size(), 3u);
  EXPECT_GT(transfer(*c, 0, 1, 1000), 0);
}

TEST_F(ClusterTest, LeftoversOfDeadSweepsAreFoundAndRemoved) {
  const std::string n0 = make_fake_leftover("n0"), sw = make_fake_leftover("sw");
  auto found = leftover_namespaces(false);
  EXPECT_NE(std::find(found.begin(), found.end(), n0), found.end());
  EXPECT_NE(std::find(found.begin(), found.end(), sw), found.end());
  EXPECT_TRUE(netns_exists(n0) && netns_exists(sw)) << "remove=false removed something";
  auto removed = leftover_namespaces(true);
  EXPECT_NE(std::find(removed.begin(), removed.end(), n0), removed.end());
  EXPECT_FALSE(netns_exists(n0));
  EXPECT_FALSE(netns_exists(sw));
  EXPECT_TRUE(leftover_namespaces(false).empty());
}

TEST_F(ClusterTest, UpRemovesLeftoversAndSaysSo) {
  const std::string fake = make_fake_leftover("n3");
  ::testing::internal::CaptureStderr();
  auto c = EmulatedCluster::up({1, "1gbit", "", "10.77.0"});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(netns_exists(fake));
  const std::string pid = fake.substr(2, fake.find('-') - 2);
  EXPECT_NE(err.find("ringbench: removed leftover namespace " + fake + " of a sweep that is gone (pid " + pid + ")"),
            std::string::npos)
      << err;
}

TEST_F(ClusterTest, PersistentClusterUpAttachDown) {
  if (!netns_with_prefix("ringbench-").empty())
    GTEST_SKIP() << "a persistent cluster (ringbench-*) is up on this machine: not touching it";
  made_persistent_ = true;
  const std::string up_out = cluster_cmd_output("up", 2, "1gbit");
  EXPECT_NE(up_out.find("ip netns exec ringbench-n0"), std::string::npos) << up_out;
  EXPECT_NE(up_out.find("10.77.0.2"), std::string::npos) << up_out;
  EXPECT_NE(up_out.find("1gbit"), std::string::npos) << up_out;
  EXPECT_EQ(netns_with_prefix("ringbench-").size(), 3u);

  {
    auto c = EmulatedCluster::attach("ringbench");
    EXPECT_EQ(c->nodes(), 2);
    EXPECT_EQ(c->spec().link, "1gbit");
    EXPECT_EQ(c->node_addr(1), "10.77.0.2");
    EXPECT_EQ(c->switch_addr(), "10.77.0.254");
    EXPECT_GT(transfer(*c, 0, 1, 100000), 0);
    EXPECT_EQ(c->describe()["prefix"], "ringbench");
  }
  EXPECT_EQ(netns_with_prefix("ringbench-").size(), 3u) << "an attached cluster's destructor removed it";

  EXPECT_TRUE(throws_saying([] { run_cluster_cmd("up", 2, "1gbit"); }, "`ringbench cluster down` first"));

  const std::string status = cluster_cmd_output("status");
  EXPECT_NE(status.find("ringbench-n1  10.77.0.2  1gbit"), std::string::npos) << status;

  const std::string down = cluster_cmd_output("down");
  EXPECT_NE(down.find("removed namespace ringbench-sw"), std::string::npos) << down;
  EXPECT_TRUE(netns_with_prefix("ringbench-").empty());

  EXPECT_TRUE(throws_saying([] { EmulatedCluster::attach("ringbench"); }, "run `ringbench cluster up` first"));
  const std::string again = cluster_cmd_output("down");
  EXPECT_NE(again.find("nothing to remove"), std::string::npos) << again;
}

TEST_F(ClusterTest, BadRateIsRefusedAndLeavesNothing) {
  EXPECT_TRUE(throws_saying([] { EmulatedCluster::up({2, "fast", "", "10.77.0"}); }, "rate 'fast'"));
  EXPECT_TRUE(netns_with_prefix(my_prefix()).empty());
}

TEST_F(ClusterTest, FailedCommandIsQuotedAndEverythingUndone) {
  // Found out by `ip addr add` half-way through: the namespaces and veths exist by then.
  const std::string quoted = "`ip -n " + my_prefix() + "sw addr add 10.77.999.254/24 dev br0`";
  EXPECT_TRUE(throws_saying([] { EmulatedCluster::up({2, "1gbit", "", "10.77.999"}); },
                            "emulated cluster: " + quoted + " failed: "));
  EXPECT_TRUE(netns_with_prefix(my_prefix()).empty());
}

TEST_F(ClusterTest, UnknownActionIsAnError) {
  EXPECT_THROW(run_cluster_cmd("sideways", 2, "1gbit"), Error);
  EXPECT_TRUE(netns_with_prefix("ringbench-").empty() || !made_persistent_);
}

TEST(ClusterProbe, SaysWhyWhenItCannot) {
  std::string why = "unchanged";
  const auto start = Clock::now();
  const bool can = can_emulate_cluster(&why);
  std::printf("can_emulate_cluster: %s in %.1f ms%s%s\n", can ? "yes" : "no",
              std::chrono::duration<double, std::milli>(Clock::now() - start).count(), can ? "" : ": ",
              can ? "" : why.c_str());
  if (can) {
    EXPECT_TRUE(why.empty()) << why;
  } else {
    EXPECT_NE(why.find("local (loopback)"), std::string::npos) << why;
  }
  for (const auto& n : netns_names()) EXPECT_EQ(n.find(my_prefix() + "probe"), std::string::npos) << n;
}

}  // namespace
}  // namespace ringbench
