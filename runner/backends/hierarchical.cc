#include "runner/backends/hierarchical.h"

#include <vector>

#include "base/errors.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/reduce.h"
#include "models/wire_staged_reducer.h"

namespace ringbench {
namespace {

class HierCommunicator : public Communicator {
 public:
  HierCommunicator(std::unique_ptr<Transport> intra, std::unique_ptr<Transport> inter, std::chrono::milliseconds wait,
                   size_t segment_bytes, size_t chunk_bytes)
      : intra_(std::move(intra)), inter_(std::move(inter)), wait_limit_(wait), segment_bytes_(segment_bytes),
        chunk_bytes_(chunk_bytes) {}

  // "shm within nodes of 2 ranks, tcp across 4 nodes"
  std::string levels() const {
    return intra_->caps().name + " within nodes of " + std::to_string(intra_->size()) + " ranks, " +
           inter_->caps().name + " across " + std::to_string(inter_->size()) + " nodes";
  }
  // "pipelined in chunks of 4194304 B" or "levels one after the other"
  std::string pipeline() const {
    return chunk_bytes_ ? "pipelined in chunks of " + std::to_string(chunk_bytes_) + " B" : "levels one after the other";
  }
  std::map<std::string, std::string> path_info() const override {
    std::map<std::string, std::string> p{
        {"transport", intra_->caps().name + "+" + inter_->caps().name + " (hierarchical)"},
        {"hierarchical", std::to_string(inter_->size()) + " nodes x " + std::to_string(intra_->size()) + " ranks"},
        {"node", std::to_string(inter_->rank())},
        {"local_rank", std::to_string(intra_->rank())},
        {"hierarchical.pipeline", pipeline()}};
    for (auto& [k, v] : intra_->path_info()) p["intra." + k] = v;
    for (auto& [k, v] : inter_->path_info()) p["inter." + k] = v;
    return p;
  }
  std::unique_ptr<AllreducePlan> allreduce(const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
                                           const AllreduceOptions& o) override {
    return std::make_unique<InAndOutOfPlacePlan<HierarchicalAllreduce>>(in, out, [&](const void* from, void* to) {
      return HierarchicalAllreduce(*intra_, *inter_, from, to, max_count, dtype, op, o, chunk_bytes_);
    });
  }
  std::unique_ptr<CollectivePlan> plan(const Collective& c, const PlanArgs&) override {
    throw Error("--hierarchical: " + c.name + " has no hierarchical algorithm; only allreduce has");
  }
  std::unique_ptr<models::GradientReducer> gradient_reducer(float* grads, size_t count, DType wire) override {
    AllreduceOptions ao;
    ao.ring.timeout = wait_limit_;
    if (segment_bytes_) ao.ring.segment_bytes = segment_bytes_;
    return std::make_unique<models::WireStagedReducer<HierarchicalAllreduce>>(
        grads, count, wire, "hierarchical ring (ours): " + levels() + ", " + pipeline(), [&](void* buf) {
          return HierarchicalAllreduce(*intra_, *inter_, buf, buf, count, wire, ReduceOp::avg, ao, chunk_bytes_);
        });
  }
  void set_gradient_segment(size_t bytes) override { segment_bytes_ = bytes; }

 private:
  std::unique_ptr<Transport> intra_, inter_;
  std::chrono::milliseconds wait_limit_;
  size_t segment_bytes_, chunk_bytes_;
};

const Backend& intra_node_backend() {
  for (const Backend* b : backends())
    if (b->ring && b->one_host && b->connect) return *b;
  throw Error("--hierarchical needs our ring over shared memory, which this program was linked without");
}

}  // namespace

std::string hierarchical_unfit(int ranks, int ranks_per_node, const Backend& inter) {
  if (!inter.ring) return "--hierarchical is our ring's; --impl " + inter.name + " has its own allreduce";
  if (inter.one_host)
    return "--hierarchical --transport " + inter.name + ": the transport across the nodes must reach other hosts "
           "(shared memory is already the level within each node)";
  if (ranks_per_node < 1) return "--ranks-per-node must be at least 1 (got " + std::to_string(ranks_per_node) + ")";
  if (ranks % ranks_per_node != 0)
    return "--ranks-per-node " + std::to_string(ranks_per_node) + " does not divide the " + std::to_string(ranks) +
           " ranks into whole nodes";
  return "";
}

std::unique_ptr<Communicator> make_hierarchical(const BackendSetup& s, const std::string& inter,
                                                const ConnectTransport& connect) {
  const Backend* inter_backend = find_backend(inter);
  if (!inter_backend) throw Error("--hierarchical: unknown transport " + inter);
  if (const std::string why = hierarchical_unfit(s.size, s.net.ranks_per_node, *inter_backend); !why.empty())
    throw Error(why);
  const int per_node = s.net.ranks_per_node, node = s.rank / per_node, local = s.rank % per_node;
  const std::string first = std::to_string(node * per_node), last = std::to_string(node * per_node + per_node - 1);
  BackendSetup within = s, across = s;
  within.rank = local;
  within.size = per_node;
  within.key_prefix = s.key_prefix + "/hier/node" + std::to_string(node);
  within.node_level = true;
  across.rank = node;
  across.size = s.size / per_node;
  across.key_prefix = s.key_prefix + "/hier/local" + std::to_string(local);
  std::unique_ptr<Transport> intra;
  try {
    intra = intra_node_backend().connect(within);
  } catch (const Error& e) {
    throw Error("--hierarchical --ranks-per-node " + std::to_string(per_node) + ": node " + std::to_string(node) +
                " (ranks " + first + ".." + last + ") cannot connect over shared memory, so its ranks are not on one "
                "host: " + e.what());
  }
  return std::make_unique<HierCommunicator>(std::move(intra), connect(across), 2 * s.timeout,
                                            s.net.gradient_segment_bytes, s.net.hier_chunk_bytes);
}

}  // namespace ringbench
