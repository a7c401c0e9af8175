#include "models/network.h"

#include <sched.h>

#include <algorithm>
#include <stdexcept>

#include "base/errors.h"
#include "models/backends.h"
#include "models/gpu_dispatch.h"
#include "ringbench/config.h"

#include <xmmintrin.h>

#if RINGBENCH_HAVE_DNNL
#include <omp.h>
#endif

namespace ringbench::models {

namespace {

constexpr const char* kPrecisionNames[] = {"fp32", "tf32", "bf16", "fp16"};

// Why `backend` cannot compute in `p` ("" when it can, as far as the backend's name tells).
std::string precision_unavailable(const std::string& backend, Precision p) {
  if (p == Precision::fp32) return "";
  const std::string what = std::string("--precision ") + precision_name(p);
  if (backend == "reference")
    return what + ": the reference backend is the fp32 oracle the others are checked against; bf16 runs on onednn";
  if (backend == "onednn" && (p == Precision::fp16 || p == Precision::tf32))
    return what + ": this needs a GPU (--backend cudnn); the oneDNN CPU backend computes in fp32 or bf16";
  return "";
}

}  // namespace

const char* precision_name(Precision p) { return kPrecisionNames[static_cast<int>(p)]; }

std::optional<Precision> parse_precision(const std::string& s) {
  for (int i = 0; i < 4; ++i)
    if (s == kPrecisionNames[i]) return static_cast<Precision>(i);
  return std::nullopt;
}

std::vector<LayerPrecisionGroup> group_layer_precisions(const std::vector<LayerPrecision>& layers) {
  std::vector<LayerPrecisionGroup> groups;
  for (const LayerPrecision& l : layers) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const LayerPrecisionGroup& g) { return g.precision == l.precision && g.why == l.why; });
    if (it != groups.end()) {
      it->nodes.push_back(l.node);
    } else {
      groups.push_back(LayerPrecisionGroup{l.precision, l.why, {l.node}});
    }
  }
  return groups;
}

std::vector<std::string> precision_names() { return {std::begin(kPrecisionNames), std::end(kPrecisionNames)}; }

// The first is what `--backend auto` picks.
std::vector<std::string> available_backends() {
  std::vector<std::string> backends;
#if RINGBENCH_HAVE_DNNL
  backends.push_back("onednn");
#endif
  backends.push_back("reference");
  if (cudnn_usable()) backends.push_back("cudnn");  // built with CUDA and a device is usable
  return backends;
}

void check_network_args(const Graph& g, int batch, const std::string& who) {
  if (batch < 1) throw std::invalid_argument(who + ": batch size must be >= 1, got " + std::to_string(batch));
  if (g.nodes.empty() || g.nodes[0].kind != OpKind::input)
    throw std::invalid_argument(who + ": the graph must start with an input node");
  if (g.outputs.empty()) throw std::invalid_argument(who + ": the graph has no outputs");
}

void check_bind_args(const Graph& g, const float* params, const float* grads, const float* state,
                     const std::string& who, bool inference_only) {
  if (g.param_count > 0 && !params) throw std::invalid_argument(who + ": bind() needs a parameter buffer");
  if (g.param_count > 0 && !grads && !inference_only)
    throw std::invalid_argument(who + ": bind() needs a gradient buffer (only an inference-only network does without)");
  if (g.state_count > 0 && !state)
    throw std::invalid_argument(who + ": bind() needs a state buffer (the graph has batch norm)");
}

void check_forward_mode(bool inference_only, const ForwardArgs& args, const std::string& who) {
  if (inference_only && args.training)
    throw Error(who + ": forward(training = true) on a network built for inference (NetworkOptions::inference_only): "
                      "it has no batch statistics to update; build it without inference_only to train");
}

void check_training_call(bool inference_only, const char* what, const std::string& who) {
  if (inference_only)
    throw Error(who + ": " + what + " on a network built for inference (NetworkOptions::inference_only): "
                      "it has no gradient buffers; build it without inference_only to train");
}

void check_output_index(const Graph& g, size_t i, const char* what, const std::string& who) {
  if (i >= g.outputs.size()) throw std::out_of_range(who + ": " + what + ": no output " + std::to_string(i));
}

std::string describe_impls(std::string head, const std::vector<std::pair<std::string, int>>& impls) {
  const char* sep = ": ";
  for (const auto& [what, n] : impls) {
    head += sep + what + " x" + std::to_string(n);
    sep = ", ";
  }
  return head;
}

void count_impl(std::vector<std::pair<std::string, int>>& impls, const std::string& what) {
  auto it = std::find_if(impls.begin(), impls.end(), [&](const auto& e) { return e.first == what; });
  if (it == impls.end())
    impls.emplace_back(what, 1);
  else
    ++it->second;
}

GradientWriters plan_gradient_writers(const Graph& g) {
  const int n = int(g.nodes.size());
  std::vector<char> is_output(size_t(n), 0);
  for (const Output& o : g.outputs) is_output[size_t(o.node)] = 1;
  GradientWriters w;
  w.first_slot.assign(size_t(n), {-1, -1});
  for (int c = n - 1; c >= 1; --c) {
    const Node& node = g.nodes[c];
    for (int k = 0; k < int(node.inputs.size()); ++k) {
      const int p = node.inputs[k];
      if (!is_output[p] && w.first_slot[p].first < 0) w.first_slot[p] = {c, k};
      if (p == 0) w.input_consumed = true;
      if (p == 0 && node.kind == OpKind::batch_norm) w.defer_input_grad = false;
    }
  }
  return w;
}

std::unique_ptr<Network> make_network(const std::string& backend, const Graph& g, int batch,
                                      [[maybe_unused]] const NetworkOptions& options) {
  if (batch < 1) throw std::invalid_argument("batch size must be >= 1, got " + std::to_string(batch));
  if (const std::string why = precision_unavailable(backend, options.precision); !why.empty())
    throw std::invalid_argument(why);
  if (backend == "reference") return make_reference_network(g, batch, options.inference_only);
#if RINGBENCH_HAVE_DNNL
  if (backend == "onednn") return make_onednn_network(g, batch, options.inference_only, options.precision, options.plain_params);
#else
  if (backend == "onednn")
    throw std::invalid_argument("this ringbench was built without oneDNN (RINGBENCH_WITH_DNNL=OFF): "
                                "use --backend reference, or rebuild with libdnnl-dev installed");
#endif
  if (backend == "cudnn") return make_gpu_network(g, batch, options);
  std::string known;
  for (const auto& b : available_backends()) known += (known.empty() ? "" : ", ") + b;
  throw std::invalid_argument("unknown backend '" + backend + "': available: " + known);
}

void set_compute_threads(int n) {
  // Flush denormals to zero (FTZ + DAZ), as deep-learning frameworks do: tiny gradients in
  // denormal range otherwise slow whole layers down many times over. The MXCSR is per thread,
  // so set it in every OpenMP worker (they persist between parallel regions) and here.
  _mm_setcsr(_mm_getcsr() | 0x8040);
#if RINGBENCH_HAVE_DNNL
  if (n > 0) omp_set_num_threads(n);
#pragma omp parallel
  _mm_setcsr(_mm_getcsr() | 0x8040);
#else
  (void)n;
#endif
}

bool pin_this_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;  // 0: this thread
}

int compute_threads() {
#if RINGBENCH_HAVE_DNNL
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace ringbench::models
