// ringbench doctor: what one host reports, and the verdicts over several hosts' reports.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/errors.h"
#include "ringbench/config.h"
#include "runner/job/doctor.h"
#include "runner/job/world.h"

namespace ringbench {
namespace {

using json = nlohmann::json;

// A checked host record as doctor_checks() gathers it; `rdma` true gives it an active rxe0.
json host(const std::string& name, int rank, bool rdma = true) {
  json ports = json::array();
  if (rdma)
    ports.push_back({{"device", "rxe0"}, {"provider", "rxe"}, {"port", 1}, {"state", "active"}, {"link_layer", "Ethernet"},
                     {"active_mtu", 1024}, {"gids", json::array({{{"index", 1}, {"gid", "::ffff:10.0.0.1"}, {"type", "RoCE v2"}, {"netdev", "eth0"}}})},
                     {"gid_index", 1}, {"gid_type", "RoCE v2"}, {"error", ""}});
  return {{"rank", rank}, {"host", name}, {"kernel", "Linux 6.1"}, {"cpu", "x"}, {"ringbench", "0.1.0 abc"},
          {"config_sha256", "0123456789abcdef"}, {"mpi", "Open MPI v4.1.4"}, {"rdma", ports},
          {"gpu", {{"cuda", "no device"}, {"vgpu", {{"kind", "none"}, {"note", ""}}}}},
          {"memory", {{"total_mib", 4096u}, {"available_mib", 2048u}, {"memlock_bytes", "unlimited"}}},
          {"net", {{"addr", "10.0.0.1"}, {"iface", "eth0"}, {"mtu", 1500}}}};
}

json verdict_of(const json& report, const std::string& check) {
  for (const json& v : doctor_verdicts(report))
    if (v["check"] == check) return v;
  return nullptr;
}

json two_hosts(const json& a, const json& b) {
  json ping = json::array({{{"ok", true}, {"ms", 5.0}, {"rank", 0}}, {{"ok", true}, {"ms", 6.0}, {"rank", 1}}});
  return {{"hosts", json::array({a, b})}, {"clock", json::array({{{"rank", 1}, {"offset_ms", 0.5}, {"rtt_ms", 1.0}}})},
          {"verbs_ping", ping}};
}

TEST(Doctor, ThisHostAloneIsReportedAndChecked) {
  World w;  // one rank, its own store
  w.store = std::make_unique<InProcStore>();
  const json r = doctor_checks(w, "0123456789abcdef", Millis(5000));
  ASSERT_EQ(r["hosts"].size(), 1u);
  const json& h = r["hosts"][0];
  EXPECT_EQ(h["ringbench"].get<std::string>().rfind(RINGBENCH_VERSION, 0), 0u);
  EXPECT_EQ(h["config_sha256"], "0123456789abcdef");
  EXPECT_GT(h["memory"]["total_mib"].get<uint64_t>(), 0u);
  EXPECT_EQ(verdict_of(r, "build")["status"], "ok");
  EXPECT_EQ(verdict_of(r, "config")["text"], "config sha256 0123456789abcdef on 1 host");
  EXPECT_TRUE(r["verbs_ping"].is_null());  // one host: no pair to ping
  const std::string text = doctor_text(r);
  EXPECT_NE(text.find("host " + h["host"].get<std::string>() + " (rank 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("\nbuild: ok, ringbench "), std::string::npos) << text;
}

TEST(Doctor, HostsWithAnotherBuildOrConfigFailNamingTheHost) {
  json b = host("g1", 1);
  b["ringbench"] = "0.1.0 def";
  json r = two_hosts(host("g0", 0), b);
  EXPECT_EQ(verdict_of(r, "build")["status"], "FAIL");
  EXPECT_EQ(verdict_of(r, "build")["text"], "host g1 has ringbench 0.1.0 def, host g0 has ringbench 0.1.0 abc");
  EXPECT_FALSE(doctor_ok({{"verdicts", doctor_verdicts(r)}}));
  b = host("g1", 1);
  b["config_sha256"] = "ffffffffffffffff";
  r = two_hosts(host("g0", 0), b);
  EXPECT_EQ(verdict_of(r, "build")["status"], "ok");
  EXPECT_EQ(verdict_of(r, "config")["status"], "FAIL");
  EXPECT_NE(verdict_of(r, "config")["text"].get<std::string>().find("host g1 has config sha256 ffffffffffffffff"), std::string::npos);
}

TEST(Doctor, VerbsVerdicts) {
  if (!RINGBENCH_HAVE_VERBS) GTEST_SKIP() << "this build has no verbs transport";
  json r = two_hosts(host("g0", 0), host("g1", 1));
  EXPECT_EQ(verdict_of(r, "verbs")["status"], "ok");
  EXPECT_EQ(verdict_of(r, "verbs")["text"].get<std::string>().rfind("on 2 hosts (rxe0, RoCE v2, MTU 1024); RC ping between all 1 pairs", 0), 0u);
  // one host without a device: the cluster is broken for verbs, and the host is named
  r = two_hosts(host("g0", 0), host("g1", 1, false));
  EXPECT_EQ(verdict_of(r, "verbs")["status"], "FAIL");
  EXPECT_EQ(verdict_of(r, "verbs")["text"], "host g1 has no RDMA device");
  // no device anywhere: a TCP-only cluster
  r = two_hosts(host("g0", 0, false), host("g1", 1, false));
  EXPECT_EQ(verdict_of(r, "verbs")["status"], "n/a");
  // a port that is down
  json down = host("g1", 1);
  down["rdma"][0]["state"] = "down";
  EXPECT_EQ(verdict_of(two_hosts(host("g0", 0), down), "verbs")["text"], "host g1 has no ACTIVE port with a GID");
  // the ping failed on one rank
  r = two_hosts(host("g0", 0), host("g1", 1));
  r["verbs_ping"][1] = {{"ok", false}, {"error", "connect timed out"}, {"rank", 1}};
  EXPECT_EQ(verdict_of(r, "verbs")["text"], "RC ping from host g1: connect timed out");
  // memory that cannot be pinned
  json locked = host("g1", 1);
  locked["memory"]["memlock_bytes"] = 8u << 20;
  const json v = verdict_of(two_hosts(host("g0", 0), locked), "verbs");
  EXPECT_EQ(v["status"], "FAIL");
  EXPECT_NE(v["text"].get<std::string>().find("host g1 may lock only 8192 KiB"), std::string::npos) << v;
}

TEST(Doctor, ClockOffsetsBeyondTheRoundTripWarn) {
  json r = two_hosts(host("g0", 0), host("g1", 1));
  EXPECT_EQ(verdict_of(r, "clock")["status"], "ok");
  r["clock"][0]["offset_ms"] = -263.5;
  EXPECT_EQ(verdict_of(r, "clock")["status"], "warn");
  EXPECT_EQ(verdict_of(r, "clock")["text"], "largest offset from g0: 263.5 ms (g1, +-0.5 ms)");
}

// A GPU the driver sees (NVML or nvidia-smi) and a ringbench built without CUDA: `--device auto`
// would train on the CPU there, so the host is a FAIL naming it and the fix.
TEST(Doctor, AGpuHostWithACpuOnlyBuildFailsNamingTheHostAndTheFix) {
  const auto with_gpu = [](json h, bool built_with_cuda) {
    h["gpu"]["built_with_cuda"] = built_with_cuda;
    h["gpu"]["vgpu"] = {{"kind", "bare-metal"}, {"note", ""},
                        {"gpus", json::array({{{"index", 0}, {"name", "NVIDIA H200"}, {"memory_mib", 143771}}})}};
    return h;
  };
  json r = two_hosts(with_gpu(host("g0", 0), true), with_gpu(host("g1", 1), false));
  json v = verdict_of(r, "gpu build");
  EXPECT_EQ(v["status"], "FAIL");
  const std::string text = v["text"];
  EXPECT_NE(text.find("host g1 has a GPU (NVIDIA H200) but its ringbench was built without CUDA"), std::string::npos) << text;
  EXPECT_NE(text.find("scripts/build.sh"), std::string::npos) << text;
  EXPECT_FALSE(doctor_ok({{"verdicts", doctor_verdicts(r)}}));
  // Built with CUDA everywhere, or no GPU where it is not: ok.
  EXPECT_EQ(verdict_of(two_hosts(with_gpu(host("g0", 0), true), with_gpu(host("g1", 1), true)), "gpu build")["status"], "ok");
  json cpu_only = host("g1", 1);
  cpu_only["gpu"]["built_with_cuda"] = false;
  EXPECT_EQ(verdict_of(two_hosts(host("g0", 0), cpu_only), "gpu build")["status"], "ok");
}

TEST(Doctor, ThisHostSaysWhetherItsBuildHasCuda) {
  World w;
  w.store = std::make_unique<InProcStore>();
  const json r = doctor_checks(w, "", Millis(5000));
  EXPECT_EQ(r["hosts"][0]["gpu"]["built_with_cuda"], bool(RINGBENCH_HAVE_CUDA));
  EXPECT_NE(verdict_of(r, "gpu build"), nullptr);
}

TEST(Doctor, ABadHostRecordFromTheStoreIsAnErrorNamingTheRankAndField) {
  World w;
  w.size = 2;
  w.store = std::make_unique<InProcStore>();
  json bad = host("g1", 1);
  bad["memory"]["available_mib"] = "lots";
  w.store->set("doctor/host/1", bad.dump());
  try {
    doctor_checks(w, "", Millis(2000));
    FAIL() << "a bad record was used";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "doctor: rank 1 sent a host record whose memory.available_mib is missing or of the wrong type");
  }
  bad = host("g1", 0);  // claims another rank
  w.store = std::make_unique<InProcStore>();
  w.store->set("doctor/host/1", bad.dump());
  EXPECT_THROW(doctor_checks(w, "", Millis(2000)), Error);
}

}  // namespace
}  // namespace ringbench
