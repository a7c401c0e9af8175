#include "runner/cli/device_server_cmd.h"

#include <csignal>
#include <cstdio>
#include <thread>

#include "base/device_memory.h"
#include "base/errors.h"
#include "base/output_file.h"
#include "collectives/auth.h"
#include "models/network.h"
#include "runner/job/gpu.h"
#include "runner/remote/device.h"
#include "runner/remote/server.h"
#include "runner/remote/shaper.h"
#include "runner/remote/verbs_link.h"
#include "vgpu/scheduler.h"

namespace ringbench {

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

remote::DeviceConfig device_config(const DeviceServerArgs& a) {
  remote::DeviceConfig c;
  // Host backends only (remote::Device says why): auto means the CPU's, even on a GPU host.
  if (a.backend == "cudnn")
    throw Error("--backend cudnn: the device server keeps its clients' buffers in host memory only (serving a GPU "
                "from device memory is not implemented): use --backend auto, onednn or reference");
  const Placement where = place_compute("cpu", a.backend == "auto" ? models::available_backends().front() : a.backend);
  c.backend = where.backend;
  c.emulated = true;
  if (a.memory_mib < 0 || a.memory_mib > 16 << 20) throw Error("--memory-mib must be in 0..16777216");
  if (a.memory_mib > 0) c.memory_bytes = uint64_t(a.memory_mib * double(1 << 20));
  if (a.max_clients < 1 || a.max_clients > 64) throw Error("--max-clients must be in 1..64");
  if (!(a.slice_ms >= 0.1 && a.slice_ms <= 10000)) throw Error("--slice-ms must be in 0.1..10000");
  if (!(a.timeout_s >= 0.1 && a.timeout_s <= 86400)) throw Error("--timeout must be in 0.1..86400 s");
  if (!(a.idle_timeout_s >= 0.1 && a.idle_timeout_s <= 864000)) throw Error("--idle-timeout must be in 0.1..864000 s");
  if (a.clients < 0) throw Error("--clients must be >= 0");
  try {
    c.sharing.policy = vgpu::parse_policy(a.policy);
  } catch (const std::invalid_argument& e) {
    throw Error(std::string("--policy: ") + e.what());
  }
  c.sharing.max_instances = a.max_clients;
  c.sharing.slice = std::chrono::microseconds(int64_t(a.slice_ms * 1000));
  if (a.threads < 0 || a.threads > 4096) throw Error("--threads must be in 0..4096");
  c.threads = a.threads > 0 ? a.threads : int(std::thread::hardware_concurrency());
  c.timeout = std::chrono::milliseconds(int64_t(a.timeout_s * 1000));
  c.idle_timeout = std::chrono::milliseconds(int64_t(a.idle_timeout_s * 1000));
  return c;
}

void log_line(const std::string& s) {
  std::printf("# device-server: %s\n", s.c_str());
  std::fflush(stdout);
}

// The link's transport; verbs where this host has an RDMA device and the link is not shaped.
remote::LinkTransport link_transport(const DeviceServerArgs& a, bool shaped) {
  const auto t = remote::parse_transport(a.transport);
  if (!t) throw Error("--transport " + a.transport.substr(0, 40) + ": not tcp or verbs");
  if (*t == remote::LinkTransport::tcp) return *t;
  if (const std::string why = remote::verbs_link_unavailable(a.ib_dev); !why.empty())
    throw Error("device-server --transport verbs: " + why);
  if (shaped)
    throw Error("--transport verbs with --link-gbps/--link-latency-us: the shaping proxy forwards TCP bytes, and the "
                "requests over verbs would bypass it");
  if (a.gid_index < -1) throw Error("--gid-index must be >= -1 (-1: auto)");
  return *t;
}

}  // namespace

void add_device_server_options(CLI::App& cmd, DeviceServerArgs& a) {
  cmd.add_option("--addr", a.addr, "Address to listen on")->capture_default_str();
  cmd.add_option("--port", a.port, "Port to listen on (0: any free one, printed)")->capture_default_str();
  cmd.add_option("--port-file", a.port_file, "Write the port listened on to this file");
  cmd.add_option("--backend", a.backend, "What computes: auto (the CPU's onednn, also on a GPU host), onednn or "
                                         "reference; cudnn is refused (no device memory yet)")->capture_default_str();
  cmd.add_option("--memory-mib", a.memory_mib, "The device's memory the clients' fractions divide (0: 16384, "
                                               "an emulated cap)")->capture_default_str();
  cmd.add_option("--policy", a.policy, "How the clients share the device's time: best_effort, equal_share, "
                                       "fixed_share")->capture_default_str();
  cmd.add_option("--max-clients", a.max_clients, "Clients at once (fixed_share's slots)")->capture_default_str();
  cmd.add_option("--slice-ms", a.slice_ms, "Time slice")->capture_default_str();
  cmd.add_option("--secret-file", a.secret_file, "The job's secret (else RINGBENCH_SECRET): required");
  cmd.add_option("--timeout", a.timeout_s, "Seconds for a request's payload, a reply, a time slice")->capture_default_str();
  cmd.add_option("--idle-timeout", a.idle_timeout_s, "Seconds a client may send nothing before it is dropped")
      ->capture_default_str();
  cmd.add_option("--clients", a.clients, "Exit after serving this many clients (0: run until SIGINT/SIGTERM)")
      ->capture_default_str();
  cmd.add_option("--threads", a.threads, "The CPU backend's threads (0: every core)")->capture_default_str();
  cmd.add_option("--link-latency-us", a.link_latency_us, "Emulated link: one-way latency added to every byte to and "
                 "from the clients (a user-space proxy in front of the server; this kernel has no netem)")
      ->capture_default_str();
  cmd.add_option("--link-gbps", a.link_gbps, "Emulated link: its rate in Gbit/s each way (0: unlimited)")
      ->capture_default_str();
  cmd.add_option("--transport", a.transport, "What the requests travel on: tcp, or verbs (RC queue pairs, bootstrapped "
                 "over the authenticated TCP connection); clients must ask for the same")->capture_default_str();
  cmd.add_option("--ib-dev", a.ib_dev, "verbs: RDMA device (default: the first with an ACTIVE port)");
  cmd.add_option("--gid-index", a.gid_index, "verbs: GID table index (-1: a RoCE v2 GID with an IPv4 address, else "
                 "RoCE v1)")->capture_default_str();
}

int run_device_server(const DeviceServerArgs& a) {
  const remote::DeviceConfig config = device_config(a);
  const std::string secret = auth::secret_from_env_or_file(a.secret_file);
  if (secret.empty())
    throw Error("device-server: needs the job's secret, so that only its clients are served: set RINGBENCH_SECRET "
                "(e.g. `openssl rand -hex 32`) or --secret-file");
  DeviceMemory::instance().set_cap(config.memory_bytes);
  remote::Device device(config);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  if (!(a.link_latency_us >= 0 && a.link_latency_us <= 1e7)) throw Error("--link-latency-us must be in 0..1e7");
  if (!(a.link_gbps >= 0 && a.link_gbps <= 1e4)) throw Error("--link-gbps must be in 0..10000");
  const bool shaped = a.link_latency_us > 0 || a.link_gbps > 0;
  const remote::LinkTransport transport = link_transport(a, shaped);
  // Shaped: the server listens on loopback only, behind the proxy that is the clients' link.
  remote::DeviceServer server(device, shaped ? "127.0.0.1" : a.addr, shaped ? 0 : a.port, secret, log_line, transport,
                              {a.ib_dev, a.gid_index});
  std::unique_ptr<remote::ShapingProxy> link;
  if (shaped)
    link = std::make_unique<remote::ShapingProxy>(
        a.addr, a.port, "127.0.0.1", server.port(),
        remote::LinkShape{std::chrono::microseconds(int64_t(a.link_latency_us)), a.link_gbps * 1e9});
  const int port = link ? link->port() : server.port();
  const std::string rdma = a.ib_dev.empty() ? "the first ACTIVE RDMA device" : a.ib_dev;
  log_line("listening on " + a.addr + ":" + std::to_string(port) +
           (transport == remote::LinkTransport::verbs
                ? " (verbs: the requests over RC queue pairs on " + rdma +
                      ", bootstrapped over tcp after the HMAC with the job's secret); "
                : " (tcp, HMAC with the job's secret); ") +
           device.line());
  if (link) log_line("EMULATED LINK to the clients: " + link->shape().text() + ", by a user-space shaping proxy");
  if (!a.port_file.empty()) write_file_atomic(a.port_file, std::to_string(port) + "\n");
  const int served = server.wait_served(a.clients, g_stop);
  log_line(std::string(g_stop ? "stopping on a signal" : "served") + " after " + std::to_string(served) +
           " client(s); refused " + std::to_string(server.refused()) + " connection(s) without the secret");
  return 0;
}

}  // namespace ringbench
