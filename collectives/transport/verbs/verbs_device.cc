// The verbs transport's device discovery: devices, ports, GIDs, provider, speed; doctor's list.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/transport/verbs/verbs_internal.h"

namespace ringbench {
namespace verbs_detail {
namespace {

std::string read_line(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

struct DeviceList {
  ibv_device** list = nullptr;
  int n = 0;
  DeviceList() { list = ibv_get_device_list(&n); }
  ~DeviceList() {
    if (list) ibv_free_device_list(list);
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (int i = 0; list && i < n; ++i) v.push_back(ibv_get_device_name(list[i]));
    return v;
  }
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

const char* port_state_name(ibv_port_state s) { return ibv_port_state_str(s); }

std::string gid_type_name(uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    default: return "IB";
  }
}

// Reads one GID table entry with its type; false for empty or unreadable entries.
bool query_gid(ibv_context* ctx, const std::string& dev, int port, int index, GidChoice* out) {
  ibv_gid_entry e{};
  if (ibv_query_gid_ex(ctx, static_cast<uint32_t>(port), static_cast<uint32_t>(index), &e, 0) == 0) {
    out->gid = e.gid;
    out->type = gid_type_name(e.gid_type);
  } else {
    // Older kernels: the plain query and the type from sysfs.
    if (ibv_query_gid(ctx, static_cast<uint8_t>(port), index, &out->gid) != 0) return false;
    std::string t = read_line("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) +
                              "/gid_attrs/types/" + std::to_string(index));
    out->type = t.find("v2") != std::string::npos ? "RoCE v2"
                : t.find("RoCE") != std::string::npos ? "RoCE v1"
                                                      : "IB";
  }
  out->index = index;
  static const uint8_t zero[16] = {};
  return std::memcmp(out->gid.raw, zero, 16) != 0;
}

bool ipv4_mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, 12) == 0;
}

}  // namespace

std::string hex(uint64_t v, int width) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%0*llx", width, static_cast<unsigned long long>(v));
  return b;
}

// Opens the device and port asked for (or the first ACTIVE one).
std::shared_ptr<Device> open_device(const VerbsOptions& o, int* port, ibv_port_attr* pattr) {
  DeviceList devs;
  if (!devs.list || devs.n == 0)
    throw Error("--transport verbs: no RDMA device found (ibv_get_device_list returned none): "
                "load rdma_rxe / check the PVRDMA driver, or use --transport tcp");
  std::vector<std::string> tried;
  for (int i = 0; i < devs.n; ++i) {
    std::string name = ibv_get_device_name(devs.list[i]);
    if (!o.device.empty() && name != o.device) continue;
    auto dev = std::make_shared<Device>();
    dev->name = name;
    dev->ctx = ibv_open_device(devs.list[i]);
    if (!dev->ctx) {
      tried.push_back(name + ": cannot open (" + std::strerror(errno) + ")");
      continue;
    }
    ibv_device_attr da{};
    if (ibv_query_device(dev->ctx, &da) != 0) {
      tried.push_back(name + ": ibv_query_device failed");
      continue;
    }
    if (o.port > 0 && o.port > da.phys_port_cnt)
      throw Error("--ib-port " + std::to_string(o.port) + ": device " + name + " has " +
                  std::to_string(da.phys_port_cnt) + " port(s)");
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
      if (o.port > 0 && p != o.port) continue;
      ibv_port_attr pa{};
      if (ibv_query_port(dev->ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
      if (pa.state != IBV_PORT_ACTIVE) {
        tried.push_back(name + " port " + std::to_string(p) + ": " + port_state_name(pa.state));
        continue;
      }
      dev->pd = ibv_alloc_pd(dev->ctx);
      check_errno(dev->pd != nullptr, "ibv_alloc_pd on " + name);
      *port = p;
      *pattr = pa;
      return dev;
    }
  }
  if (!o.device.empty() && tried.empty())
    throw Error("--transport verbs --ib-dev " + o.device + ": no such RDMA device; this host has: " +
                join(devs.names()));
  throw Error("--transport verbs: no ACTIVE port on " +
              (o.device.empty() ? std::string("any RDMA device") : o.device) + " (" +
              join(tried) + "): is the link up (rdma link show)?");
}

GidChoice choose_gid(ibv_context* ctx, const std::string& dev, int port,
                     const ibv_port_attr& pa, int requested) {
  GidChoice c;
  if (requested >= 0) {
    if (requested >= pa.gid_tbl_len || !query_gid(ctx, dev, port, requested, &c))
      throw Error("--gid-index " + std::to_string(requested) + ": no GID at that index on " +
                  dev + " port " + std::to_string(port) + " (table of " +
                  std::to_string(pa.gid_tbl_len) + "; see ibv_devinfo -v)");
    return c;
  }
  // Best first: RoCE v2 with an IPv4-mapped address (routable, what PVRDMA and rxe set up
  // for an IPv4 interface), RoCE v2, RoCE v1 with IPv4, RoCE v1, anything.
  int best_score = -1;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    GidChoice g;
    if (!query_gid(ctx, dev, port, i, &g)) continue;
    int score = (g.type == "RoCE v2" ? 4 : g.type == "RoCE v1" ? 2 : 0) + (ipv4_mapped(g.gid) ? 1 : 0);
    if (score > best_score) {
      best_score = score;
      c = g;
    }
  }
  if (c.index < 0 && pa.link_layer == IBV_LINK_LAYER_ETHERNET)
    throw Error("device " + dev + " port " + std::to_string(port) +
                " has no GID (RoCE needs one: is an IP address configured on its netdev?)");
  return c;
}

std::string provider_of(const std::string& dev, const ibv_device_attr& da) {
  std::error_code ec;
  auto link = std::filesystem::read_symlink("/sys/class/infiniband/" + dev + "/device/driver", ec);
  if (!ec) return link.filename().string();
  if (dev.rfind("rxe", 0) == 0) return "rxe";  // Soft-RoCE has no parent PCI device
  if (dev.rfind("siw", 0) == 0) return "siw";
  return "vendor " + hex(da.vendor_id) + " part " + std::to_string(da.vendor_part_id);
}

double port_gbps(const ibv_port_attr& pa) {
  double lane = 0;
  switch (pa.active_speed) {
    case 1: lane = 2.5; break;
    case 2: lane = 5; break;
    case 4: case 8: lane = 10; break;
    case 16: lane = 14; break;
    case 32: lane = 25; break;
    case 64: lane = 50; break;
    case 128: lane = 100; break;
    default: break;
  }
  int width = 0;
  switch (pa.active_width) {
    case 1: width = 1; break;
    case 2: width = 4; break;
    case 4: width = 8; break;
    case 8: width = 12; break;
    case 16: width = 2; break;
    default: break;
  }
  return lane * width;
}

int mtu_bytes(uint32_t mtu) { return 128 << mtu; }  // IBV_MTU_256 = 1

}  // namespace verbs_detail

using namespace verbs_detail;  // the public functions below are written in its terms

std::vector<std::string> verbs_device_names() { return DeviceList().names(); }

std::vector<RdmaPort> rdma_inventory() {
  std::vector<RdmaPort> out;
  DeviceList devs;
  for (int i = 0; devs.list && i < devs.n; ++i) {
    Device dev;
    dev.name = ibv_get_device_name(devs.list[i]);
    dev.ctx = ibv_open_device(devs.list[i]);
    ibv_device_attr da{};
    if (!dev.ctx || ibv_query_device(dev.ctx, &da) != 0) {
      RdmaPort p;
      p.device = dev.name;
      p.error = std::string("cannot open or query: ") + std::strerror(errno);
      out.push_back(p);
      continue;
    }
    for (int port = 1; port <= da.phys_port_cnt; ++port) {
      RdmaPort p;
      p.device = dev.name;
      p.provider = provider_of(dev.name, da);
      p.port = port;
      ibv_port_attr pa{};
      if (ibv_query_port(dev.ctx, static_cast<uint8_t>(port), &pa) != 0) {
        p.error = "ibv_query_port failed";
        out.push_back(p);
        continue;
      }
      p.state = port_state_name(pa.state);
      p.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
      p.active_mtu = mtu_bytes(pa.active_mtu);
      const std::string attrs = "/sys/class/infiniband/" + dev.name + "/ports/" + std::to_string(port) + "/gid_attrs/ndevs/";
      for (int g = 0; g < pa.gid_tbl_len; ++g) {
        GidChoice c;
        if (query_gid(dev.ctx, dev.name, port, g, &c))
          p.gids.push_back({g, verbs_wire::gid_string(c.gid.raw), c.type, read_line(attrs + std::to_string(g))});
      }
      try {
        p.gid_index = choose_gid(dev.ctx, dev.name, port, pa, -1).index;
      } catch (const std::exception& e) {
        p.error = e.what();
      }
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace ringbench
