#include "runner/job/doctor.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <functional>
#include <set>

#include "base/errors.h"
#include "collectives/net.h"
#include "ringbench/config.h"
#include "ringbench/git_commit.h"
#include "runner/job/gpu.h"
#include "runner/job/metadata.h"
#include "runner/job/mpi_util.h"
#include "vgpu/detect.h"
#if RINGBENCH_HAVE_VERBS
#include "collectives/transport/verbs/verbs_transport.h"
#endif

namespace ringbench {
namespace {

using json = nlohmann::json;

// Registering memory pins it: below this much lockable memory the verbs ring cannot register
// its buffers (ulimit -l, /etc/security/limits.conf).
constexpr uint64_t kMinMemlockBytes = uint64_t{64} << 20;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json meminfo() {
  std::ifstream f("/proc/meminfo");
  json m = json::object();
  for (std::string key; f >> key;) {
    uint64_t kib = 0;
    f >> kib;
    f.ignore(64, '\n');
    if (key == "MemTotal:") m["total_mib"] = kib / 1024;
    if (key == "MemAvailable:") m["available_mib"] = kib / 1024;
  }
  rlimit r{};
  getrlimit(RLIMIT_MEMLOCK, &r);
  m["memlock_bytes"] = r.rlim_cur == RLIM_INFINITY ? json("unlimited") : json(uint64_t(r.rlim_cur));
  return m;
}

json rdma_ports() {
  json ports = json::array();
#if RINGBENCH_HAVE_VERBS
  for (const RdmaPort& p : rdma_inventory()) {
    json gids = json::array();
    for (const auto& g : p.gids) gids.push_back({{"index", g.index}, {"gid", g.gid}, {"type", g.type}, {"netdev", g.netdev}});
    const auto used = std::find_if(p.gids.begin(), p.gids.end(), [&](const auto& g) { return g.index == p.gid_index; });
    ports.push_back({{"device", p.device}, {"provider", p.provider}, {"port", p.port}, {"state", p.state},
                     {"link_layer", p.link_layer}, {"active_mtu", p.active_mtu}, {"gids", gids},
                     {"gid_index", p.gid_index}, {"gid_type", used == p.gids.end() ? "" : used->type},
                     {"error", p.error}});
  }
#endif
  return ports;
}

json net_path(const World& w) {
  const std::string iface = net::iface_of_ipv4(w.default_addr);
  const std::string mtu = iface.empty() ? "" : read_first_line("/sys/class/net/" + iface + "/mtu");
  return {{"addr", w.default_addr}, {"iface", iface.empty() ? "unknown" : iface},
          {"mtu", mtu.empty() ? json(nullptr) : json(std::stoi(mtu))}};
}

json gpu_summary() {
  const json dev = gpu_json(-1);
  release_gpu_context();
  return {{"cuda", dev.value("available", false) ? json(dev) : json(dev.value("reason", std::string("no device")))},
          {"built_with_cuda", built_with_cuda()},
          {"vgpu", vgpu::to_json(vgpu::detect_gpus())}};
}

// What this rank can tell about its own host.
json host_facts(const World& w, const std::string& config_sha256) {
  const json h = host_info();
  return {{"rank", w.rank}, {"host", h["host"]}, {"kernel", h["kernel"]}, {"cpu", h["cpu"]},
          {"ringbench", std::string(RINGBENCH_VERSION) + " " + RINGBENCH_GIT_COMMIT},
          {"config_sha256", config_sha256},
          {"mpi", w.mpi ? mpi::library_version() : RINGBENCH_HAVE_MPI ? "not under mpirun" : "not built"},
          {"rdma", rdma_ports()}, {"gpu", gpu_summary()}, {"memory", meminfo()}, {"net", net_path(w)}};
}

// Rank 0 against every other rank, NTP style over the store: the sample with the shortest
// round trip bounds the offset best (|error| <= rtt / 2).
json clock_offsets(World& w, Millis timeout) {
  json out = json::array();
  constexpr int kRounds = 5;
  for (int r = 1; r < w.size; ++r) {
    if (w.rank != 0 && w.rank != r) continue;
    double best_rtt = 1e300, best_offset = 0;
    for (int i = 0; i < kRounds; ++i) {
      const std::string key = "doctor/clock/" + std::to_string(r) + "/" + std::to_string(i);
      if (w.rank == r) {
        w.store->get(key + "/ping", timeout);
        w.store->set(key + "/pong", std::to_string(now_us()));
        continue;
      }
      const int64_t t0 = now_us();
      w.store->set(key + "/ping", "1");
      const std::string pong = w.store->get(key + "/pong", timeout);
      const int64_t t2 = now_us();
      int64_t t1 = 0;
      if (pong.empty() || pong.size() > 20 || pong.find_first_not_of("0123456789") != std::string::npos)
        throw Error("doctor: rank " + std::to_string(r) + " sent a clock reading that is not a number");
      t1 = std::stoll(pong);
      const double rtt = double(t2 - t0) / 1000.0, offset = (double(t1) - double(t0 + t2) / 2.0) / 1000.0;
      if (rtt < best_rtt) best_rtt = rtt, best_offset = offset;
    }
    if (w.rank == 0) out.push_back({{"rank", r}, {"offset_ms", best_offset}, {"rtt_ms", best_rtt}});
  }
  return out;
}

// Whether every host has an ACTIVE port with a GID, and if not, the first host that has none.
std::string verbs_gap(const json& hosts) {
  if (!RINGBENCH_HAVE_VERBS) return "this ringbench was built without the verbs transport";
  for (const json& h : hosts) {
    bool active = false;
    for (const json& p : h["rdma"]) active = active || (p["state"] == "active" && p["gid_index"].get<int>() >= 0);
    if (!active)
      return "host " + h["host"].get<std::string>() +
             (h["rdma"].empty() ? " has no RDMA device" : " has no ACTIVE port with a GID");
  }
  return "";
}

// One message each way between every pair of ranks over verbs RC QPs; every value names its
// sender and receiver, so a misdelivered message is caught.
json verbs_ping(World& w, Millis timeout) {
#if RINGBENCH_HAVE_VERBS
  const auto t0 = std::chrono::steady_clock::now();
  try {
    VerbsOptions o;
    o.timeout = timeout;
    o.job_id = w.job_id;
    o.key_prefix = "doctor-verbs";
    auto t = make_verbs_transport(*w.store, w.rank, w.size, o);
    const auto word = [](int from, int to) { return (uint64_t(from) << 32 | uint64_t(to)) ^ 0x5eedd0c7a11ULL; };
    std::vector<uint64_t> out(size_t(w.size)), in(size_t(w.size), 0);
    for (int p = 0; p < w.size; ++p) out[size_t(p)] = word(w.rank, p);
    auto sb = t->register_buffer(out.data(), out.size() * 8), rb = t->register_buffer(in.data(), in.size() * 8);
    std::vector<std::unique_ptr<Request>> reqs;
    for (int p = 0; p < w.size; ++p)
      if (p != w.rank) reqs.push_back(t->irecv(p, *rb, size_t(p) * 8, 8, 77));
    for (int p = 0; p < w.size; ++p)
      if (p != w.rank) reqs.push_back(t->isend(p, *sb, size_t(p) * 8, 8, 77));
    for (auto& r : reqs) r->wait(timeout);
    for (int p = 0; p < w.size; ++p)
      if (p != w.rank && in[size_t(p)] != word(p, w.rank))
        throw Error("the message from rank " + std::to_string(p) + " arrived wrong");
    const auto info = t->path_info();
    return {{"ok", true}, {"ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()},
            {"device", info.count("device") ? info.at("device") : ""}};
  } catch (const std::exception& e) {
    return {{"ok", false}, {"error", e.what()}};
  }
#else
  (void)w, (void)timeout;
  return {{"ok", false}, {"error", "not built"}};
#endif
}


// ---- verdicts: every field read from another host is checked for its type first ----

std::string str(const json& j, const char* k) { return j.is_object() && j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "?"; }

json verdict(const std::string& check, const std::string& status, const std::string& text) {
  return {{"check", check}, {"status", status}, {"text", text}};
}

// The check's value on every host: "ok, VALUE on N hosts", or which host differs from rank 0.
json same_everywhere(const json& hosts, const std::string& check, const std::function<std::string(const json&)>& value) {
  const std::string first = value(hosts[0]);
  for (const json& h : hosts)
    if (value(h) != first)
      return verdict(check, "FAIL", "host " + str(h, "host") + " has " + value(h) + ", host " + str(hosts[0], "host") +
                                        " has " + first);
  return verdict(check, "ok", first + " on " + std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts"));
}

const json* used_port(const json& h) {
  if (!h.contains("rdma") || !h["rdma"].is_array()) return nullptr;
  for (const json& p : h["rdma"])
    if (p.is_object() && str(p, "state") == "active" && p.value("gid_index", -1) >= 0) return &p;
  return nullptr;
}

json verbs_verdict(const json& hosts, const json& ping) {
  const std::string gap = verbs_gap(hosts);
  const size_t n = hosts.size();
  if (!gap.empty()) {
    bool none = true;  // no RDMA anywhere is a TCP-only cluster, not a broken one
    for (const json& h : hosts) none = none && h["rdma"].empty();
    return verdict("verbs", none || !RINGBENCH_HAVE_VERBS ? "n/a" : "FAIL", gap);
  }
  std::set<std::string> kinds;
  for (const json& h : hosts) {
    const json& p = *used_port(h);
    kinds.insert(str(p, "device") + ", " + str(p, "gid_type") + ", MTU " + std::to_string(p.value("active_mtu", 0)));
  }
  std::string what;
  for (const auto& k : kinds) what += (what.empty() ? "" : "; ") + k;
  if (ping.is_null()) return verdict("verbs", "ok", "on 1 host (" + what + "); the RC ping needs 2 or more hosts (run under mpirun)");
  double ms = 0;
  for (const json& r : ping) {
    if (!r.value("ok", false))
      return verdict("verbs", "FAIL", "RC ping from host " + str(hosts[size_t(r.value("rank", 0))], "host") + ": " + str(r, "error"));
    ms = std::max(ms, r.value("ms", 0.0));
  }
  char t[64];
  std::snprintf(t, sizeof t, "%.1f s", ms / 1000);
  std::string memlock;
  for (const json& h : hosts) {
    const json& m = h["memory"]["memlock_bytes"];
    if (m.is_number() && m.get<uint64_t>() < kMinMemlockBytes)
      return verdict("verbs", "FAIL", "host " + str(h, "host") + " may lock only " + std::to_string(m.get<uint64_t>() >> 10) +
                                          " KiB (ulimit -l): registering the ring's buffers pins them; raise it to unlimited");
  }
  return verdict("verbs", "ok", "on " + std::to_string(n) + " hosts (" + what + "); RC ping between all " +
                                    std::to_string(n * (n - 1) / 2) + " pairs in " + t);
}

json memory_verdict(const json& hosts) {
  uint64_t least = UINT64_MAX;
  std::string where;
  for (const json& h : hosts) {
    const uint64_t mib = h["memory"].value("available_mib", uint64_t{0});
    if (mib < least) least = mib, where = str(h, "host");
  }
  return verdict("memory", least < 256 ? "warn" : "ok",
                 "at least " + std::to_string(least) + " MiB available on every host (least: " + where + ")");
}

// A GPU the driver reports (NVML or nvidia-smi, which need no CUDA build) on a host whose
// ringbench cannot use it: `--device auto` would train on the CPU there without a word.
json gpu_build_verdict(const json& hosts) {
  for (const json& h : hosts) {
    const json& g = h["gpu"];
    const json& gpus = g["vgpu"].contains("gpus") && g["vgpu"]["gpus"].is_array() ? g["vgpu"]["gpus"] : json::array();
    if (gpus.empty() || !g.contains("built_with_cuda") || g["built_with_cuda"] != false) continue;
    return verdict("gpu build", "FAIL",
                   "host " + str(h, "host") + " has a GPU (" + str(gpus[0], "name") +
                       ") but its ringbench was built without CUDA: install the ringbench-cuda package there, or rebuild "
                       "with scripts/build.sh on a host with the CUDA toolkit (nvcc), which turns CUDA on");
  }
  return verdict("gpu build", "ok", "every host with a GPU has a ringbench built with CUDA");
}

json clock_verdict(const json& hosts, const json& clock) {
  if (clock.empty()) return verdict("clock", "ok", "1 host");
  double worst = 0, rtt = 0;
  std::string who;
  for (const json& c : clock) {
    const double off = std::fabs(c.value("offset_ms", 0.0));
    if (off >= worst) worst = off, rtt = c.value("rtt_ms", 0.0), who = str(hosts[size_t(c.value("rank", 0))], "host");
  }
  char t[160];
  std::snprintf(t, sizeof t, "largest offset from %s: %.1f ms (%s, +-%.1f ms)", str(hosts[0], "host").c_str(), worst,
                who.c_str(), rtt / 2);
  // Timelines of different hosts are merged by wall clock: beyond 100 ms they mislead.
  return verdict("clock", worst - rtt / 2 > 100 ? "warn" : "ok", t);
}

json verdicts(const json& r) {
  const json& hosts = r["hosts"];
  json v = json::array();
  v.push_back(same_everywhere(hosts, "build", [](const json& h) { return "ringbench " + str(h, "ringbench"); }));
  if (str(hosts[0], "config_sha256").empty())
    v.push_back(verdict("config", "n/a", "no --config given"));
  else
    v.push_back(same_everywhere(hosts, "config", [](const json& h) { return "config sha256 " + str(h, "config_sha256"); }));
  v.push_back(same_everywhere(hosts, "mpi", [](const json& h) { return str(h, "mpi"); }));
  v.push_back(verbs_verdict(hosts, r["verbs_ping"]));
  v.push_back(same_everywhere(hosts, "tcp", [](const json& h) {
    const json& n = h["net"];
    return str(n, "iface") + " (MTU " + (n.contains("mtu") && n["mtu"].is_number() ? std::to_string(n["mtu"].get<int>()) : "?") + ")";
  }));
  v.push_back(same_everywhere(hosts, "gpu", [](const json& h) {
    const json& c = h["gpu"]["cuda"];
    return c.is_string() ? "no GPU (" + c.get<std::string>() + ")" : str(c, "name");
  }));
  v.push_back(gpu_build_verdict(hosts));
  v.push_back(memory_verdict(hosts));
  v.push_back(clock_verdict(hosts, r["clock"]));
  return v;
}

// A host's facts come from another rank through the store: every field the verdicts and the
// table read is checked for its type first, and a record that fails names the rank and field.
void check_host_record(const json& h, int rank) {
  const auto need = [&](const char* k, bool ok_type, const std::string& where) {
    if (!ok_type) throw Error("doctor: rank " + std::to_string(rank) + " sent a host record whose " + where + k + " is missing or of the wrong type");
  };
  const auto is = [](const json& o, const char* k, json::value_t t) {
    if (!o.is_object() || !o.contains(k)) return false;
    const json& v = o[k];
    return t == json::value_t::number_integer ? v.is_number_integer() : t == json::value_t::string ? v.is_string()
         : t == json::value_t::array ? v.is_array() : v.is_object();
  };
  using T = json::value_t;
  for (const char* k : {"host", "kernel", "cpu", "ringbench", "config_sha256", "mpi"}) need(k, is(h, k, T::string), "");
  need("rank", is(h, "rank", T::number_integer) && h["rank"] == rank, "");
  need("rdma", is(h, "rdma", T::array), "");
  for (const json& p : h["rdma"]) {
    for (const char* k : {"device", "provider", "state", "link_layer", "gid_type", "error"}) need(k, is(p, k, T::string), "rdma.");
    for (const char* k : {"port", "active_mtu", "gid_index"}) need(k, is(p, k, T::number_integer), "rdma.");
    need("gids", is(p, "gids", T::array), "rdma.");
    for (const json& g : p["gids"]) {
      need("index", is(g, "index", T::number_integer), "rdma.gids.");
      for (const char* k : {"gid", "type", "netdev"}) need(k, is(g, k, T::string), "rdma.gids.");
    }
  }
  need("gpu", is(h, "gpu", T::object) && h["gpu"].contains("cuda") && (h["gpu"]["cuda"].is_string() || h["gpu"]["cuda"].is_object()) &&
                     is(h["gpu"], "vgpu", T::object), "");
  need("built_with_cuda", !h["gpu"].contains("built_with_cuda") || h["gpu"]["built_with_cuda"].is_boolean(), "gpu.");
  const json& v = h["gpu"]["vgpu"];
  need("gpus", !v.contains("gpus") || (v["gpus"].is_array() && std::all_of(v["gpus"].begin(), v["gpus"].end(),
                                                                        [&](const json& g) { return is(g, "name", T::string); })),
       "gpu.vgpu.");
  need("memory", is(h, "memory", T::object), "");
  const json& m = h["memory"];
  for (const char* k : {"total_mib", "available_mib"}) need(k, m.contains(k) && m[k].is_number_unsigned(), "memory.");
  need("memlock_bytes", m.contains("memlock_bytes") && (m["memlock_bytes"].is_number_unsigned() || m["memlock_bytes"] == "unlimited"), "memory.");
  need("net", is(h, "net", T::object) && is(h["net"], "addr", T::string) && is(h["net"], "iface", T::string) &&
                     h["net"].contains("mtu") && (h["net"]["mtu"].is_null() || h["net"]["mtu"].is_number_integer()), "");
}

void check_ping_record(const json& r, int rank) {
  if (!r.contains("ok") || !r["ok"].is_boolean() || (r.contains("ms") && !r["ms"].is_number()) ||
      (r.contains("error") && !r["error"].is_string()))
    throw Error("doctor: rank " + std::to_string(rank) + " sent a verbs ping result that is not one");
}

}  // namespace

json doctor_verdicts(const json& report) { return verdicts(report); }

json doctor_checks(World& w, const std::string& config_sha256, Millis timeout) {
  w.store->set("doctor/host/" + std::to_string(w.rank), host_facts(w, config_sha256).dump());
  json hosts = json::array();
  for (int r = 0; r < w.size; ++r) {
    hosts.push_back(get_rank_json(*w.store, "doctor/host/" + std::to_string(r), r, timeout));
    check_host_record(hosts.back(), r);
  }
  const json clock = clock_offsets(w, timeout);
  json ping = nullptr;
  if (w.size > 1 && verbs_gap(hosts).empty()) {  // every rank sees the same hosts, so all join or none
    w.store->set("doctor/verbs/" + std::to_string(w.rank), verbs_ping(w, timeout).dump());
    if (w.rank == 0) {
      ping = json::array();
      for (int r = 0; r < w.size; ++r) {
        json res = get_rank_json(*w.store, "doctor/verbs/" + std::to_string(r), r, 2 * timeout);
        check_ping_record(res, r);
        res["rank"] = r;
        ping.push_back(res);
      }
    }
  }
  if (w.rank != 0) return nullptr;
  json report = {{"hosts", hosts}, {"clock", clock}, {"verbs_ping", ping}};
  report["verdicts"] = verdicts(report);
  return report;
}

bool doctor_ok(const json& report) {
  for (const json& v : report["verdicts"])
    if (v["status"] == "FAIL") return false;
  return true;
}

std::string doctor_text(const json& report) {
  std::string out;
  const auto row = [&](const std::string& k, const std::string& v) { out += "  " + k + std::string(12 - std::min<size_t>(k.size(), 11), ' ') + v + "\n"; };
  for (const json& h : report["hosts"]) {
    out += "host " + str(h, "host") + " (rank " + std::to_string(h.value("rank", -1)) + ")\n";
    row("kernel", str(h, "kernel"));
    row("cpu", str(h, "cpu"));
    row("ringbench", str(h, "ringbench") + (str(h, "config_sha256").empty() ? "" : ", config sha256 " + str(h, "config_sha256")));
    row("mpi", str(h, "mpi"));
    row("net", str(h["net"], "addr") + " on " + str(h["net"], "iface") +
                   (h["net"]["mtu"].is_number() ? ", MTU " + std::to_string(h["net"]["mtu"].get<int>()) : ""));
    if (h["rdma"].empty()) row("rdma", "no RDMA device");
    for (const json& p : h["rdma"]) {
      std::string gids;
      for (const json& g : p["gids"]) {  // appended piece by piece: GCC 12's -Wrestrict misfires on "x" + std::string
        if (!gids.empty()) gids += ", ";
        gids += std::to_string(g.value("index", -1));
        for (const char* k : {"gid", "type", "netdev"}) {
          gids += k[0] == 'g' ? ": " : " ";
          gids += str(g, k);
        }
      }
      row("rdma", str(p, "device") + " port " + std::to_string(p.value("port", 0)) + " " + str(p, "state") + " " +
                      str(p, "link_layer") + " MTU " + std::to_string(p.value("active_mtu", 0)) + ", GID index used " +
                      std::to_string(p.value("gid_index", -1)) + " (" + str(p, "gid_type") + ")" +
                      (str(p, "error").empty() ? "" : "; " + str(p, "error")));
      row("  gids", gids.empty() ? "none" : gids);
    }
    const json& c = h["gpu"]["cuda"];
    row("gpu", c.is_string() ? "none: " + c.get<std::string>() : str(c, "name") + ", driver CUDA " + str(c, "driver_cuda"));
    row("vgpu", str(h["gpu"]["vgpu"], "kind") + ": " + str(h["gpu"]["vgpu"], "note"));
    const json& m = h["memory"];
    row("memory", std::to_string(m.value("available_mib", 0)) + " MiB available of " + std::to_string(m.value("total_mib", 0)) +
                      " MiB; memlock " + (m["memlock_bytes"].is_string() ? "unlimited" : std::to_string(m["memlock_bytes"].get<uint64_t>() >> 10) + " KiB"));
    for (const json& k : report["clock"])
      if (k.value("rank", -1) == h.value("rank", -2)) {
        char t[96];
        std::snprintf(t, sizeof t, "%+.1f ms against rank 0 (round trip %.1f ms)", k.value("offset_ms", 0.0), k.value("rtt_ms", 0.0));
        row("clock", t);
      }
    out += "\n";
  }
  for (const json& v : report["verdicts"]) out += str(v, "check") + ": " + str(v, "status") + ", " + str(v, "text") + "\n";
  return out;
}
}  // namespace ringbench
