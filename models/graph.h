// A model as a backend-independent graph: nodes in forward (= parameter registration) order,
// each with its op's spec and its output shape per sample. Trainable parameters, and the
// batch-norm running statistics, are views into flat buffers whose layouts live here, so a
// gradient bucket is an (offset, length) range of one buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringbench::models {

// Per-sample activation shape (channels, height, width); FC outputs are c x 1 x 1.
struct Dims {
  int c = 0, h = 1, w = 1;
  int64_t numel() const { return int64_t(c) * h * w; }
  bool operator==(const Dims&) const = default;
};
std::string to_string(const Dims& d);  // "32x28x28"

enum class OpKind { input, conv, batch_norm, relu, relu6, max_pool, avg_pool, concat, fc, dropout };
const char* op_name(OpKind k);

struct Pads {
  int top = 0, bottom = 0, left = 0, right = 0;
  static Pads same(int p) { return {p, p, p, p}; }
};

// Weights are [out, in/groups, kh, kw] (OIHW); depthwise is groups == in == out.
struct ConvSpec {
  int out_channels = 0;
  int kh = 1, kw = 1;
  int stride_h = 1, stride_w = 1;
  Pads pad;
  int groups = 1;
  bool bias = false;  // no bias when a batch norm follows
};

struct PoolSpec {
  int kh = 1, kw = 1;
  int stride_h = 1, stride_w = 1;
  Pads pad;
  bool exclude_padding = false;  // avg pooling: divide by the taps inside the image only
};

// Training normalises with the batch's biased variance; running statistics follow
// running = (1 - momentum) * running + momentum * batch, with the unbiased batch variance
// (PyTorch's convention). Inference uses the running statistics.
struct BatchNormSpec {
  float eps = 1e-3f;
  float momentum = 0.1f;
};

struct FcSpec {  // flattens its input (c*h*w features, NCHW order); weights are [out, in]
  int out_features = 0;
  bool bias = true;
};

struct DropoutSpec {
  float rate = 0.5f;  // probability of dropping; kept values are scaled by 1 / (1 - rate)
};

struct Node {
  OpKind kind = OpKind::input;
  std::string name;
  std::vector<int> inputs;  // node indices, all smaller than this node's
  Dims out;
  ConvSpec conv;
  PoolSpec pool;
  BatchNormSpec bn;
  FcSpec fc;
  DropoutSpec dropout;
  std::vector<int> params;  // indices into Graph::params: conv/fc {weight[, bias]}, bn {gamma, beta}
  int state = -1;           // batch norm: index into Graph::state (running mean, then running var)
};

// One trainable tensor, a view [offset, offset + numel) of the flat parameter buffer (and of the
// gradient buffer, which has the same layout).
struct ParamTensor {
  std::string name;  // e.g. "Mixed_5b.branch1x1.bn.gamma"
  std::string kind;  // conv_w, dwconv_w, fc_w, bias, bn_gamma, bn_beta
  std::vector<int> shape;
  size_t offset = 0, numel = 0;
  bool decay = false;  // weight decay applies (conv and fc weights only)
  int node = -1;
};

// Non-trainable state (batch-norm running mean and variance, `channels` floats each, mean
// first), a view of the flat state buffer. Not allreduced.
struct StateTensor {
  std::string name;
  size_t offset = 0, channels = 0;
  int node = -1;
};

struct Output {
  int node = -1;
  float loss_weight = 1.0f;  // the total loss is the weighted sum of each output's cross-entropy
};

class Graph {
 public:
  std::string model;  // "lenet", "mobilenet_v1", ...
  std::vector<Node> nodes;  // nodes[0] is the input
  std::vector<ParamTensor> params;
  std::vector<StateTensor> state;
  std::vector<Output> outputs;
  size_t param_count = 0;  // floats in the flat parameter (and gradient) buffer
  size_t state_count = 0;

  // Builders: each appends a node, infers its shape, registers its parameters, and returns the
  // node's index. Invalid shapes (kernel larger than the padded input, channels not divisible
  // by groups, ...) throw std::invalid_argument naming the node.
  int input(Dims d);
  int conv(int x, const std::string& name, const ConvSpec& s);
  int batch_norm(int x, const std::string& name, const BatchNormSpec& s = {});
  int relu(int x, const std::string& name);
  int relu6(int x, const std::string& name);
  int max_pool(int x, const std::string& name, const PoolSpec& s);
  int avg_pool(int x, const std::string& name, const PoolSpec& s);
  int concat(const std::vector<int>& xs, const std::string& name);  // along channels
  int fc(int x, const std::string& name, const FcSpec& s);
  int dropout(int x, const std::string& name, float rate);
  void add_output(int node, float loss_weight = 1.0f);

  const Dims& input_dims() const { return nodes.at(0).out; }
  const Node& output_node(size_t i = 0) const { return nodes.at(outputs.at(i).node); }
  // Parameter tensors in the order backprop produces their gradients (reverse registration).
  std::vector<const ParamTensor*> params_backprop_order() const;

 private:
  int add(Node n);
  const Dims& dims_of(int x, const std::string& node) const;
  int add_param(int node, const std::string& name, const std::string& kind,
                std::vector<int> shape, bool decay);
};

// Deterministic initialisation from `seed`: conv and fc weights He-uniform (fan-in), biases
// and bn beta 0, bn gamma 1; running mean 0 and running variance 1.
void init_params(const Graph& g, uint64_t seed, float* params, float* state);

// Dropout's keep decision for one element, the same on every backend and every rank: a hash
// of (seed, step, node, global sample index, element index within the sample in NCHW order).
bool dropout_keep(uint64_t seed, uint64_t step, int node, int64_t sample, int64_t elem, float rate);

}  // namespace ringbench::models
