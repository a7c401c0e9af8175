// Our ring over RDMA verbs (collectives/transport/verbs/verbs_transport.h): RoCE, PVRDMA, Soft-RoCE. Its own
// options (--ib-dev, --ib-port, --gid-index, --mr-chunk) are registered here.
#include <CLI/CLI.hpp>
#include <filesystem>

#include "base/errors.h"
#include "ringbench/config.h"
#include "runner/backends/ring.h"
#include "base/bytes.h"
#include "runner/job/world.h"
#if RINGBENCH_HAVE_VERBS
#include "collectives/transport/verbs/verbs_transport.h"
#endif

namespace ringbench {
namespace {

struct VerbsArgs {
  std::string ib_dev;  // "" = the first device with an ACTIVE port
  int ib_port = 0;     // 0 = auto
  int gid_index = -1;  // -1 = auto (RoCE v2 with an IPv4-mapped address, else v1)
  std::string mr_chunk = "1G";
};
VerbsArgs args;  // bound to the command line of whichever command runs

void add_options(CLI::App& cmd) {
  cmd.add_option("--ib-dev", args.ib_dev, "verbs: RDMA device (default: the first with an ACTIVE "
                 "port; see ibv_devices)");
  cmd.add_option("--ib-port", args.ib_port, "verbs: port of the device (0: the first ACTIVE one)")
      ->capture_default_str();
  cmd.add_option("--gid-index", args.gid_index, "verbs: GID table index (-1: a RoCE v2 GID with an "
                 "IPv4 address, else RoCE v1; see show_gids)")->capture_default_str();
  cmd.add_option("--mr-chunk", args.mr_chunk, "verbs: register buffers in memory regions of at most "
                 "this size (PVRDMA allows 1G)")->capture_default_str();
}

void validate_options() {
  if (args.ib_port < 0) throw Error("--ib-port must be >= 0 (0: auto)");
  if (args.gid_index < -1) throw Error("--gid-index must be >= -1 (-1: auto)");
  if (parse_bytes(args.mr_chunk) < 4096) throw Error("--mr-chunk must be at least 4K");
}

std::string unavailable() {
  if (!RINGBENCH_HAVE_VERBS)
    return "this ringbench was built without the verbs transport (-DRINGBENCH_WITH_VERBS=ON, "
           "needs libibverbs-dev)";
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec), end;
  if (ec || it == end) return "no RDMA device on this host (ibv_get_device_list found none)";
  return "";
}

std::unique_ptr<Transport> connect_verbs(const BackendSetup& s) {
#if RINGBENCH_HAVE_VERBS
  VerbsOptions o;
  o.device = args.ib_dev;
  o.port = args.ib_port;
  o.gid_index = args.gid_index;
  o.mr_chunk_bytes = parse_bytes(args.mr_chunk);
  o.timeout = s.timeout;
  o.spin = s.net.spin;
  o.job_id = s.world.job_id;
  o.key_prefix = s.key_prefix + "/verbs";
  return make_verbs_transport(s.store, s.rank, s.size, o);
#else
  (void)s;
  throw Error("--transport verbs: " + unavailable());
#endif
}

std::vector<OptionAsRun> options_as_run() {
  return {{"--ib-dev", "ib_dev", args.ib_dev.empty() ? "auto" : args.ib_dev},
          {"--ib-port", "ib_port", args.ib_port},
          {"--gid-index", "gid_index", args.gid_index},
          {"--mr-chunk", "mr_chunk_bytes", parse_bytes(args.mr_chunk)}};
}

RINGBENCH_REGISTER_BACKEND(verbs, ring_backend({.name = "verbs",
                                                .order = 20,
                                                .help = "our ring over RDMA verbs",
                                                .connect = connect_verbs,
                                                .options = {add_options, validate_options, options_as_run},
                                                .unavailable = unavailable}));

}  // namespace
}  // namespace ringbench
