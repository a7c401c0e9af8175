#include "runner/ring_transport.h"

#include "base/errors.h"
#include "ringbench/config.h"
#include "runner/bytes.h"
#if RINGBENCH_HAVE_VERBS
#include "collectives/verbs_transport.h"
#endif

namespace ringbench {

void add_verbs_options(CLI::App& cmd, VerbsArgs& v) {
  cmd.add_option("--ib-dev", v.ib_dev, "verbs: RDMA device (default: the first with an ACTIVE "
                 "port; see ibv_devices)");
  cmd.add_option("--ib-port", v.ib_port, "verbs: port of the device (0: the first ACTIVE one)")
      ->capture_default_str();
  cmd.add_option("--gid-index", v.gid_index, "verbs: GID table index (-1: a RoCE v2 GID with an "
                 "IPv4 address, else RoCE v1; see show_gids)")->capture_default_str();
  cmd.add_option("--mr-chunk", v.mr_chunk, "verbs: register buffers in memory regions of at most "
                 "this size (PVRDMA allows 1G)")->capture_default_str();
}

void validate_verbs_args(const std::string& transport, const VerbsArgs& v) {
  if (transport == "verbs" && !RINGBENCH_HAVE_VERBS)
    throw Error("--transport verbs: this ringbench was built without the verbs transport "
                "(-DRINGBENCH_WITH_VERBS=ON, needs libibverbs-dev)");
  if (v.ib_port < 0) throw Error("--ib-port must be >= 0 (0: auto)");
  if (v.gid_index < -1) throw Error("--gid-index must be >= -1 (-1: auto)");
  if (parse_bytes(v.mr_chunk) < 4096) throw Error("--mr-chunk must be at least 4K");
}

std::unique_ptr<Transport> make_ring_transport(const std::string& name, Store& store, int rank,
                                               int size, const TcpOptions& tcp,
                                               const VerbsArgs& v) {
  if (name == "tcp") return make_tcp_transport(store, rank, size, tcp);
  validate_verbs_args(name, v);
  if (name != "verbs") throw Error("--transport " + name + " is not a transport of our ring");
#if RINGBENCH_HAVE_VERBS
  VerbsOptions vo;
  vo.device = v.ib_dev;
  vo.port = v.ib_port;
  vo.gid_index = v.gid_index;
  vo.mr_chunk_bytes = parse_bytes(v.mr_chunk);
  vo.timeout = tcp.timeout;
  vo.spin = tcp.spin;
  vo.job_id = tcp.job_id;
  return make_verbs_transport(store, rank, size, vo);
#else
  (void)store, (void)rank, (void)size;
  throw Error("unreachable");
#endif
}

}  // namespace ringbench
