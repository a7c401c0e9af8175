#include "runner/remote/verbs_link.h"

#include <algorithm>

#include "base/errors.h"
#include "ringbench/config.h"
#include "runner/remote/pair_store.h"
#if RINGBENCH_HAVE_VERBS
#include "collectives/transport/verbs/verbs_transport.h"
#endif

namespace ringbench::remote {

std::string verbs_link_unavailable(const std::string& ib_dev) {
#if RINGBENCH_HAVE_VERBS
  const auto names = verbs_device_names();
  if (names.empty())
    return "no RDMA device on this host (ibv_get_device_list found none): load rdma_rxe or the NIC's driver, or "
           "use transport tcp";
  if (!ib_dev.empty() && std::find(names.begin(), names.end(), ib_dev) == names.end()) {
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    return "no RDMA device " + ib_dev.substr(0, 64) + " on this host (it has: " + all + ")";
  }
  return "";
#else
  (void)ib_dev;
  return "this ringbench was built without the verbs transport (-DRINGBENCH_WITH_VERBS=ON, needs libibverbs-dev)";
#endif
}

std::unique_ptr<TransportChannel> open_verbs_channel(int fd, const std::string& peer, bool server, Millis timeout,
                                                     const VerbsLinkOptions& o) {
#if RINGBENCH_HAVE_VERBS
  if (const std::string why = verbs_link_unavailable(o.ib_dev); !why.empty())
    throw Error("the verbs device link: " + why);
  PairStore store(fd, server, peer, timeout);
  VerbsOptions v;
  v.device = o.ib_dev;
  v.gid_index = o.gid_index;
  v.timeout = timeout;
  v.job_id = "ringbench-device-link";
  v.key_prefix = "verbs";
  std::unique_ptr<Transport> t;
  try {
    t = make_verbs_transport(store, server ? 0 : 1, 2, v);
  } catch (const IoError& e) {
    throw IoError(-1, peer + ": the verbs bootstrap failed: " + e.what());
  }
  return std::make_unique<TransportChannel>(std::move(t), fd, peer, !server, timeout);
#else
  (void)fd;
  (void)peer;
  (void)server;
  (void)timeout;
  (void)o;
  throw Error("the verbs device link: " + verbs_link_unavailable());
#endif
}

}  // namespace ringbench::remote
