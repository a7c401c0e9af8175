// A backend is one way for ranks to allreduce: our ring over one of our transports (tcp,
// verbs, ...), MPI_Allreduce, or NCCL. Each is one file of this folder that describes itself
// in a Backend and registers it at static initialization (RINGBENCH_REGISTER_BACKEND), as Google
// Benchmark's BENCHMARK() does, so adding one touches no central file. Commands, sweeps and
// reports find backends here by name; none of them spells a backend's name.
//
// Setup is kept apart from what is timed (Gloo's way): make() connects the ranks, allreduce()
// registers the buffers, and only CollectivePlan::run() is timed.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives/allreduce.h"
#include "collectives/dtype.h"
#include "collectives/store.h"
#include "runner/backends/collective.h"
#include "models/trainer.h"

namespace CLI {
class App;
}

namespace ringbench {

struct World;

// The network options every command shares (--addr, --iface, --sockets-per-peer, ...).
struct NetArgs {
  std::string addr, iface;
  int sockets_per_peer = 2;
  int socket_buffer_bytes = 0;  // 0: the kernel's autotuning
  std::chrono::microseconds spin{200};
  size_t gradient_segment_bytes = 0;  // train --segment: our ring's segment for gradients (0: its default)
  // --hierarchical: our ring's allreduce in two levels, shared memory among each node's
  // `ranks_per_node` ranks (ranks node x R .. node x R + R-1) and this transport across the nodes.
  bool hierarchical = false;
  int ranks_per_node = 1;
  size_t hier_chunk_bytes = size_t{4} << 20;  // --hier-chunk: the levels' pipeline chunk (0: not pipelined)
};

// What a backend gets to connect a command's ranks.
struct BackendSetup {
  Store& store;
  int rank, size;
  const World& world;                  // job id, secret, default address
  std::chrono::milliseconds timeout;   // peer-silence limit; a single wait may take twice this
  NetArgs net;
  std::string key_prefix;              // the command's store namespace: "allreduce", "train"
  bool node_level = false;             // connects the hierarchical allreduce's level within a node
};

// The ranks of one job, connected by one backend. Its plans and gradient reducers refer to it:
// they must be destroyed before it.
class Communicator {
 public:
  virtual ~Communicator() = default;
  // The path actually used, for `#` metadata and JSON (transport=tcp, addr=..., ...).
  virtual std::map<std::string, std::string> path_info() const = 0;
  // `ringbench allreduce`: buffers in host memory of `max_count` elements.
  virtual std::unique_ptr<AllreducePlan> allreduce(const void* in, void* out, size_t max_count, DType dtype,
                                                   ReduceOp op, const AllreduceOptions& ring) = 0;
  // `ringbench <collective>`: our algorithm (`c.ring`) over this backend's transport, or the
  // backend's own call (`c.mpi`); an Error naming both where this backend has none.
  virtual std::unique_ptr<CollectivePlan> plan(const Collective& c, const PlanArgs& a) = 0;
  // `ringbench train`: averages gradients in place, in host memory, or on the device for
  // backends that reduce GPU buffers (Backend::gpu_buffers). `wire`: the type the gradients
  // cross the network in (bf16, f16: compressed); a backend that cannot throws Error saying so.
  virtual std::unique_ptr<models::GradientReducer> gradient_reducer(float* grads, size_t count,
                                                                    DType wire = DType::f32) = 0;
  // `train --autotune`: the largest segment of the gradient reducers made from now on (0: the
  // ring's default). Our ring's; the other backends throw Error (they have no segment).
  virtual void set_gradient_segment(size_t bytes);
};

// One of a backend's own options as a run used it: `--ib-port 1` on the `# options:` line,
// "ib_port": 1 in meta.options.
struct OptionAsRun {
  std::string flag;       // "--ib-port"
  std::string key;        // "ib_port"
  nlohmann::json value;   // a string or a number
};
// " --ib-port 1 --gid-index 3": the line's part (strings as they are, numbers in decimal).
std::string options_line(const std::vector<OptionAsRun>& options);
nlohmann::json options_json(const std::vector<OptionAsRun>& options);

// A backend's own options: added to every command that takes --transport and validated
// whichever backend runs; as_run() gives their values when it runs, for the `# options:` line
// and meta.options.
struct BackendOptions {
  std::function<void(CLI::App&)> add;
  std::function<void()> validate;
  std::function<std::vector<OptionAsRun>()> as_run;
};

struct Backend {
  std::string name;         // the value of --transport, of --impl for a backend of its own, and of a point
  int order = 0;            // where it sorts in help, tables and reports
  bool ring = false;        // our ring over a Transport: `allreduce --impl ring --transport <name>`
  bool needs_mpirun = false;  // only mpirun can start its ranks
  bool gpu_buffers = false;   // reduces GPU buffers, one GPU per rank
  bool float_only = false;    // reduces float32 only (MPI has no half types)
  bool one_host = false;      // connects only ranks of one host (shared memory)
  std::string title;        // `allreduce`'s header: "<title> over <over>"
  std::string over;
  std::string help;         // one phrase for --help
  // "" when this build and host can run it, else why not (for a point: skipped, with this).
  std::function<std::string()> unavailable;
  // "" when it runs collective `c`, else why not (a sweep point of c over it: skipped, with
  // this; Communicator::plan throws it). Null: it runs every registered collective.
  std::function<std::string(const Collective& c)> lacks;
  BackendOptions options;  // its own options, or none
  std::function<std::unique_ptr<Communicator>(const BackendSetup&)> make;
  // Our ring's backends: connects the transport alone, for a level of the hierarchical allreduce.
  std::function<std::unique_ptr<Transport>(const BackendSetup&)> connect;
  // The environment a rank on an emulated cluster's node needs for the backend to see the node
  // as a host of its own (`host_id`), talking over `iface`; or empty.
  std::function<std::vector<std::string>(const std::string& host_id, const std::string& iface)> node_env;
};

// The backend the others are compared with (reports' "vs TCP"), and the default of --transport:
// what every cluster has.
inline const std::string kBaselineBackend = "tcp";

bool register_backend(Backend b);
#define RINGBENCH_REGISTER_BACKEND(ident, ...) \
  [[maybe_unused]] static const bool ident##_registered = ::ringbench::register_backend(__VA_ARGS__)

// Every registered backend, in `order`.
const std::vector<const Backend*>& backends();
const Backend* find_backend(const std::string& name);
// The backend `name` given to `option` ("--transport"); an unknown name is an Error listing
// the known ones that `accept` admits.
const Backend& backend_for(const std::string& option, const std::string& name,
                           const std::function<bool(const Backend&)>& accept);
// "tcp, verbs or mpi": the names `accept` admits, in order.
std::string backend_names(const std::function<bool(const Backend&)>& accept, const std::string& last = " or ");
bool any_backend(const Backend&);
bool is_ring(const Backend&);  // our ring over a transport

// Every backend's own options on `cmd`, and their checks.
void add_backend_options(CLI::App& cmd);
void validate_backend_options();
// Why a point's transport cannot run here, "<name>: <why>" ("" when it can; "none" is one rank
// and needs no backend).
std::string backend_unavailable(const std::string& name);
// Why backend `b` cannot run collective `c` ("" when it can): its `lacks`.
std::string backend_lacks(const Backend& b, const Collective& c);

}  // namespace ringbench
