// Training throughput of the oneDNN CPU backend in bf16 against fp32 (issue 39: bf16 >= 1.6x fp32
// for Inception v3, >= 1.3x for MobileNet v1 at 128 px, batch 16, one rank). Runs alternate
// between the precisions (fp32, bf16, fp32, ...) so a neighbour's load hits both alike; each run
// builds its network, warms up two steps and times `steps` more. Prints each model's median
// img/s per precision and the ratio; --profile adds where a step's time goes per precision
// (profile_onednn_primitives, summed by the kind of operation), --layers the slowest layers of a
// whole training step.
//   OMP_NUM_THREADS=2 precision_bench [--models inception_v3,mobilenet_v1] [--size 128]
//                     [--batch 16] [--runs 5] [--steps 3] [--profile [--node NAME]] [--layers]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "models/dnnl_network.h"
#include "models/network.h"
#include "models/trainer.h"
#include "models/zoo.h"

namespace m = ringbench::models;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Images per second of `steps` training steps (after two to warm up).
double train_rate(const m::Graph& g, int batch, int steps, m::Precision p) {
  auto net = m::make_network("onednn", g, batch, {.precision = p});
  m::Trainer t(*net, {}, nullptr);
  auto src = m::make_synthetic_source(g.input_dims(), g.output_node().out.c, batch, 1, 0);
  for (int i = 0; i < 2; ++i) t.step(*src);
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) t.step(*src);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return double(batch) * steps / s;
}

// The kind of an operation: "conv fwd jit:avx512_core_bf16" -> "conv fwd", reorders by what
// they move, host loops as they are.
std::string kind_of(const std::string& what) {
  const size_t colon = what.find(':');
  if (colon == std::string::npos) return what;
  const size_t space = what.rfind(' ', colon);
  return space == std::string::npos ? what : what.substr(0, space);
}

void profile(const m::Graph& g, int batch, m::Precision p, const std::string& node) {
  const auto prims = m::profile_onednn_primitives(g, batch, 3, p);
  for (const auto& t : prims)
    if (t.node == node)
      std::printf("  %s %s %s: %.2f ms in the step, %.2f ms alone\n", m::precision_name(p), t.node.c_str(),
                  t.what.c_str(), t.in_step_seconds * 1e3, t.seconds * 1e3);
  std::map<std::string, double> by_kind;
  double total = 0;
  for (const auto& t : prims) {
    by_kind[kind_of(t.what)] += t.in_step_seconds;
    total += t.in_step_seconds;
  }
  std::vector<std::pair<double, std::string>> sorted;
  for (const auto& [k, s] : by_kind) sorted.emplace_back(s, k);
  std::sort(sorted.rbegin(), sorted.rend());
  std::printf("  %s: sum of primitives in the step %.1f ms\n", m::precision_name(p), total * 1e3);
  for (const auto& [s, k] : sorted)
    if (s > 0.01 * total) std::printf("    %6.1f ms %5.1f%%  %s\n", s * 1e3, 100 * s / total, k.c_str());
}

// The slowest layers of one training step (after two to warm up), as the network's trace sees
// them: what a whole step costs per layer, host loops and reorders included.
void slowest_layers(const m::Graph& g, int batch, m::Precision p) {
  auto net = m::make_network("onednn", g, batch, {.precision = p});
  m::Trainer t(*net, {}, nullptr);
  auto src = m::make_synthetic_source(g.input_dims(), g.output_node().out.c, batch, 1, 0);
  for (int i = 0; i < 2; ++i) t.step(*src);
  std::vector<std::pair<double, std::string>> spans;
  net->set_trace([&](int node, m::Phase phase, auto begin, auto end) {
    spans.emplace_back(std::chrono::duration<double>(end - begin).count(),
                       g.nodes[size_t(node)].name + (phase == m::Phase::forward ? " fwd" : " bwd"));
  });
  const auto r = t.step(*src);
  double traced = 0;
  for (const auto& sp : spans) traced += sp.first;
  std::sort(spans.rbegin(), spans.rend());
  std::printf("  %s: step %.1f ms, layers %.1f ms; slowest:\n", m::precision_name(p), r.step_s * 1e3, traced * 1e3);
  for (size_t i = 0; i < std::min<size_t>(8, spans.size()); ++i)
    std::printf("    %6.1f ms  %s\n", spans[i].first * 1e3, spans[i].second.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models = {"inception_v3", "mobilenet_v1"};
  int size = 128, batch = 16, runs = 5, steps = 3;
  bool with_profile = false, with_layers = false;
  std::string node;  // --profile: list this node's operations
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--models" && has_value) {
      models.clear();
      std::stringstream ss(argv[++i]);
      for (std::string name; std::getline(ss, name, ',');) models.push_back(name);
    } else if (a == "--size" && has_value) size = std::atoi(argv[++i]);
    else if (a == "--batch" && has_value) batch = std::atoi(argv[++i]);
    else if (a == "--runs" && has_value) runs = std::atoi(argv[++i]);
    else if (a == "--steps" && has_value) steps = std::atoi(argv[++i]);
    else if (a == "--profile") with_profile = true;
    else if (a == "--layers") with_layers = true;
    else if (a == "--node" && has_value) node = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--models inception_v3,mobilenet_v1] [--size 128] [--batch 16] [--runs 5] "
                   "[--steps 3] [--profile [--node NAME]] [--layers]\n",
                   argv[0]);
      return 2;
    }
  }
  m::set_compute_threads(0);  // FTZ/DAZ as in ringbench train; threads as OMP_NUM_THREADS says
  std::printf("# %d threads, %d px, batch %d; median of %d runs of %d steps each, fp32 and bf16 alternating\n",
              m::compute_threads(), size, batch, runs, steps);
  std::printf("| model | fp32 img/s | bf16 img/s | bf16 / fp32 | runs fp32 | runs bf16 |\n|---|---|---|---|---|---|\n");
  for (const std::string& model : models) {
    const m::Graph g = m::build_model(model, {.image_size = size});
    std::vector<double> fp32, bf16;
    for (int r = 0; r < runs; ++r) {
      fp32.push_back(train_rate(g, batch, steps, m::Precision::fp32));
      bf16.push_back(train_rate(g, batch, steps, m::Precision::bf16));
    }
    auto list = [](const std::vector<double>& v) {
      std::string s;
      char one[32];
      for (double x : v) {
        std::snprintf(one, sizeof one, s.empty() ? "%.1f" : " %.1f", x);
        s += one;
      }
      return s;
    };
    std::printf("| %s | %.2f | %.2f | %.2fx | %s | %s |\n", model.c_str(), median(fp32), median(bf16),
                median(bf16) / median(fp32), list(fp32).c_str(), list(bf16).c_str());
    std::fflush(stdout);
    if (with_layers) {
      slowest_layers(g, batch, m::Precision::fp32);
      slowest_layers(g, batch, m::Precision::bf16);
    }
    if (with_profile) {
      profile(g, batch, m::Precision::fp32, node);
      profile(g, batch, m::Precision::bf16, node);
    }
  }
  return 0;
}
