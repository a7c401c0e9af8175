// The reference backend is the oracle the other backends are compared against, so it is
// checked on its own (ref_layers_test.cc, ref_graph_test.cc): forward values against small hand-computed examples, and every
// gradient against central finite differences of the scalar loss
//   L = sum_i sum(y_i * r_i)      (r_i fixed random, so dL/dy_i = r_i)
// on tiny shapes, for every op and variant, and for branching and two-output graphs.
//
// Tolerances: the network computes in float32 (sums in double), the loss is summed in double,
// and the central difference uses h = 1e-2. A derivative passes when
//   |analytic - numeric| <= 1e-4 + 1e-3 * max(|analytic|, |numeric|).
// That is tighter than the usual float bounds (1e-3 + 1e-2 * ...), which would let a 1% error
// in a linear op through. Measured: every check here still passes at 3e-5 + 3e-4 * ...; the
// largest differences come from batch norm's curvature (O(h^2) truncation, ~2e-5).
// Inputs are chosen so no ReLU or max-pool kink lies within h of an input element (values
// bounded away from 0 and 6, max-pool inputs distinct by 0.05 > 2h); ops after a conv that
// could straddle a kink are not used in the composite graphs.
//
// This header: the problems (a tiny graph, its inputs and fixed random loss weights), the finite
// differences and the tolerance, shared by both test files.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/backends.h"
#include "models/graph.h"
#include "models/network.h"


namespace ringbench::models::ref_testing {

// ---------------------------------------------------------------------------------------------
// Test data

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  std::vector<float> uniform_vec(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& e : v) e = uniform(lo, hi);
    return v;
  }
  // Magnitudes in [0.1, 1], random signs: at least 0.1 from ReLU's kink.
  std::vector<float> away_from_zero(size_t n) {
    std::vector<float> v(n);
    for (float& e : v) e = (uniform(0, 1) < 0.5f ? -1.0f : 1.0f) * uniform(0.1f, 1.0f);
    return v;
  }
  // Distinct values 0.05 apart in random order: no max-pool tie within a perturbation.
  std::vector<float> distinct(size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = (float(i) - float(n) / 2) * 0.05f;
    std::shuffle(v.begin(), v.end(), gen_);
    return v;
  }

 private:
  std::mt19937_64 gen_;
};

// A graph at a batch size with its buffers; the loss weights r are one vector per output.
struct Problem {
  Graph g;
  int batch = 2;
  std::vector<float> x, params, grads, state;
  std::vector<std::vector<float>> r;

  size_t count(int node) const { return size_t(batch) * size_t(g.nodes.at(node).out.numel()); }
};

// Parameters from init_params, then batch-norm gamma/beta, biases and running statistics
// randomised so every gradient and the inference path are exercised; x and r in [-1, 1].
inline Problem make_problem(Graph g, int batch, uint64_t seed = 1) {
  Problem p;
  p.g = std::move(g);
  p.batch = batch;
  p.params.assign(p.g.param_count, 0.0f);
  p.grads.assign(p.g.param_count, 0.0f);
  p.state.assign(p.g.state_count, 0.0f);
  init_params(p.g, seed, p.params.data(), p.state.data());
  Rng rng(seed * 7919 + 17);
  for (const ParamTensor& t : p.g.params) {
    float* v = p.params.data() + t.offset;
    for (size_t i = 0; i < t.numel; ++i) {
      if (t.kind == "bn_gamma") v[i] = rng.uniform(0.5f, 1.5f);
      if (t.kind == "bn_beta" || t.kind == "bias") v[i] = rng.uniform(-0.5f, 0.5f);
    }
  }
  for (const StateTensor& s : p.g.state)
    for (size_t c = 0; c < s.channels; ++c) {
      p.state[s.offset + c] = rng.uniform(-0.5f, 0.5f);
      p.state[s.offset + s.channels + c] = rng.uniform(0.5f, 2.0f);
    }
  p.x = rng.uniform_vec(p.count(0), -1, 1);
  for (const Output& o : p.g.outputs) p.r.push_back(rng.uniform_vec(p.count(o.node), -1, 1));
  return p;
}

// A graph of one op on an input of shape `in`, its output the graph's output.
inline Graph single_op(Dims in, const std::function<int(Graph&, int)>& op) {
  Graph g;
  const int x = g.input(in);
  g.add_output(op(g, x));
  return g;
}

inline std::unique_ptr<Network> bound_network(Problem& p) {
  auto net = make_reference_network(p.g, p.batch);
  net->bind(p.params.data(), p.grads.data(), p.state.data());
  return net;
}

inline std::vector<float> forward_output(Network& net, const Problem& p, const ForwardArgs& args, size_t i = 0) {
  net.set_input(p.x.data());
  net.forward(args);
  std::vector<float> y(p.count(p.g.outputs.at(i).node));
  net.get_output(i, y.data());
  return y;
}

inline double loss(Network& net, const Problem& p, const ForwardArgs& args) {
  net.set_input(p.x.data());
  net.forward(args);
  double total = 0;
  for (size_t i = 0; i < p.g.outputs.size(); ++i) {
    std::vector<float> y(p.r[i].size());
    net.get_output(i, y.data());
    for (size_t k = 0; k < y.size(); ++k) total += double(y[k]) * double(p.r[i][k]);
  }
  return total;
}

struct Grads {
  std::vector<float> dx, dparams;
};

inline Grads analytic_grads(Network& net, Problem& p, const ForwardArgs& args) {
  net.set_input(p.x.data());
  net.forward(args);
  for (size_t i = 0; i < p.r.size(); ++i) net.set_output_grad(i, p.r[i].data());
  net.backward();
  Grads g;
  g.dx.resize(p.x.size());
  net.get_input_grad(g.dx.data());
  g.dparams = p.grads;
  return g;
}

// ---------------------------------------------------------------------------------------------
// The finite-difference check

struct Tolerance {
  double h = 1e-2;     // central-difference step
  double rel = 1e-3;   // see the top of the file
  double abs = 1e-4;
};

class Mismatches {
 public:
  void check(const std::string& what, double analytic, double numeric, const Tolerance& tol) {
    ++checked_;
    max_abs_ = std::max(max_abs_, std::abs(analytic));
    const double bound = tol.abs + tol.rel * std::max(std::abs(analytic), std::abs(numeric));
    if (std::abs(analytic - numeric) <= bound) return;
    if (++failed_ <= 8)
      ADD_FAILURE() << what << ": analytic " << analytic << " vs central difference " << numeric;
  }
  ~Mismatches() {
    EXPECT_EQ(failed_, 0) << "of " << checked_ << " derivatives";
    EXPECT_GT(max_abs_, 1e-3) << "all gradients are ~0: the check would be vacuous";
  }

 private:
  int checked_ = 0, failed_ = 0;
  double max_abs_ = 0;
};

// dL/dx and dL/dparams against central differences, for every element.
inline void expect_gradients(Problem& p, const ForwardArgs& args = {}, const Tolerance& tol = {}) {
  auto net = bound_network(p);
  const Grads a = analytic_grads(*net, p, args);
  Mismatches m;
  auto central = [&](float& v) {
    const float saved = v;
    v = saved + float(tol.h);
    const double up = loss(*net, p, args);
    v = saved - float(tol.h);
    const double down = loss(*net, p, args);
    v = saved;
    return (up - down) / (2 * tol.h);
  };
  for (size_t i = 0; i < p.x.size(); ++i) m.check("dx[" + std::to_string(i) + "]", a.dx[i], central(p.x[i]), tol);
  for (const ParamTensor& t : p.g.params)
    for (size_t i = 0; i < t.numel; ++i)
      m.check(t.name + "[" + std::to_string(i) + "]", a.dparams[t.offset + i], central(p.params[t.offset + i]), tol);
}

inline void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// Specs in one line, for the ops of the tiny test graphs.
inline ConvSpec conv_spec(int out, int kh, int kw, int stride_h, int stride_w, Pads pad, int groups, bool bias) {
  return {out, kh, kw, stride_h, stride_w, pad, groups, bias};
}

inline PoolSpec pool_spec(int kh, int kw, int stride_h, int stride_w, Pads pad, bool exclude_padding = false) {
  return {kh, kw, stride_h, stride_w, pad, exclude_padding};
}

}  // namespace ringbench::models::ref_testing
