// The zoo's models against the published architecture tables in tests/data/models/: every
// layer's shape and hyper-parameters, every trainable tensor in backprop order, total counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/graph.h"
#include "models/zoo.h"

namespace ringbench::models {
namespace {

using Row = std::map<std::string, std::string>;

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) out.emplace_back();
    else if (ch != '\r') out.back() += ch;
  }
  return out;
}

std::vector<Row> read_csv(const std::string& file) {
  const std::string path = std::string(RINGBENCH_TEST_DATA) + "/models/" + file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv_line(line);
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != header.size()) throw std::runtime_error(path + ": bad row: " + line);
    Row r;
    for (size_t i = 0; i < cells.size(); ++i) r[header[i]] = cells[i];
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string join(const std::vector<int>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The message of the std::invalid_argument that f throws ("" if none).
template <class F>
std::string invalid_argument_of(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

int node_index(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == name) return int(i);
  return -1;
}

struct Case {
  const char* model;
  bool aux;
  const char* csv;  // file prefix in tests/data/models/
  size_t params;    // the published trainable parameter count
  size_t tensors;
  std::vector<std::string> classifier;  // tensors that depend on the class count
  std::set<std::string> extra_nodes;    // graph nodes the table does not list
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"lenet", false, "mnist_lenet", 1663370, 8, {"affine1.weight", "affine1.bias"}, {"input", "dropout"}},
      {"mobilenet_v1", false, "mobilenet_v1", 4231976, 83,
       {"Conv2d_1c_1x1.weight", "Conv2d_1c_1x1.bias"}, {"input"}},
      {"inception_v3", false, "inception_v3", 23834568, 284, {"fc.weight", "fc.bias"}, {"input"}},
      {"inception_v3", true, "inception_v3_aux", 27161264, 292,
       {"fc.weight", "fc.bias", "AuxLogits.fc.weight", "AuxLogits.fc.bias"}, {"input"}},
  };
  return c;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.model << (c.aux ? " with aux" : ""); }

class ZooTest : public ::testing::TestWithParam<Case> {
 protected:
  Graph build(ModelOptions o = {}) const {
    o.aux_logits = GetParam().aux;
    return build_model(GetParam().model, o);
  }
};

TEST_P(ZooTest, TotalParamsMatchPublishedCount) {
  const Graph g = build();
  EXPECT_EQ(g.model, GetParam().model);
  EXPECT_EQ(g.param_count, GetParam().params);
  EXPECT_EQ(g.params.size(), GetParam().tensors);
  size_t sum = 0;
  for (const ParamTensor& p : g.params) {
    EXPECT_EQ(p.offset, sum) << p.name;
    sum += p.numel;
  }
  EXPECT_EQ(sum, g.param_count);
}

TEST_P(ZooTest, BackpropOrderMatchesTable) {
  const Graph g = build();
  const std::vector<Row> rows = read_csv(std::string(GetParam().csv) + "_grads_backprop_order.csv");
  const std::vector<const ParamTensor*> bp = g.params_backprop_order();
  ASSERT_EQ(bp.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const ParamTensor& p = *bp[i];
    SCOPED_TRACE("bp_idx " + r.at("bp_idx") + " " + r.at("name"));
    EXPECT_EQ(std::to_string(i), r.at("bp_idx"));
    EXPECT_EQ(&p - g.params.data(), std::stol(r.at("fwd_idx")));
    EXPECT_EQ(p.name, r.at("name"));
    EXPECT_EQ(p.kind, r.at("kind"));
    EXPECT_EQ(join(p.shape, "x"), r.at("shape"));
    EXPECT_EQ(p.numel, std::stoul(r.at("numel")));
    EXPECT_EQ(p.decay, p.kind == "conv_w" || p.kind == "dwconv_w" || p.kind == "fc_w");
  }
}

TEST_P(ZooTest, LayersMatchTable) {
  const Graph g = build();
  const std::vector<Row> rows = read_csv(std::string(GetParam().csv) + "_layers.csv");
  std::set<std::string> listed;
  int prev = 0;
  for (const Row& r : rows) {
    const std::string& name = r.at("name");
    const std::string& op = r.at("op");
    if (op == "softmax") continue;  // part of the loss, not a graph node
    SCOPED_TRACE("layer " + r.at("idx") + " " + name);
    listed.insert(name);
    const int id = node_index(g, name);
    ASSERT_GE(id, 0) << "missing from the graph";
    EXPECT_GT(id, prev) << "out of the table's forward order";
    prev = id;
    const Node& n = g.nodes[size_t(id)];
    EXPECT_EQ(op == "dwconv" ? "conv" : op, op_name(n.kind));
    EXPECT_EQ(to_string(n.out), r.at("out_shape"));
    std::vector<std::string> ins;
    for (int in : n.inputs) ins.push_back(to_string(g.nodes[size_t(in)].out));
    std::string in_shape;
    for (const std::string& s : ins) in_shape += (in_shape.empty() ? "" : "+") + s;
    EXPECT_EQ(in_shape, r.at("in_shape"));
    if (n.kind == OpKind::conv) {
      const ConvSpec& s = n.conv;
      EXPECT_EQ(join({s.kh, s.kw}, "x"), r.at("kernel"));
      EXPECT_EQ(s.stride_h, s.stride_w);
      EXPECT_EQ(std::to_string(s.stride_h), r.at("stride"));
      EXPECT_EQ(join({s.pad.top, s.pad.bottom, s.pad.left, s.pad.right}, ","), r.at("pad_tblr"));
      EXPECT_EQ(std::to_string(s.groups), r.at("groups"));
    } else if (n.kind == OpKind::max_pool || n.kind == OpKind::avg_pool) {
      const PoolSpec& s = n.pool;
      EXPECT_EQ(join({s.kh, s.kw}, "x"), r.at("kernel"));
      EXPECT_EQ(std::to_string(s.stride_h), r.at("stride"));
      EXPECT_EQ(join({s.pad.top, s.pad.bottom, s.pad.left, s.pad.right}, ","), r.at("pad_tblr"));
      EXPECT_FALSE(s.exclude_padding);  // torchvision's count_include_pad=True
    } else if (n.kind == OpKind::batch_norm) {
      EXPECT_FLOAT_EQ(n.bn.eps, 1e-3f);
    }
    size_t numel = 0;
    for (int p : n.params) numel += g.params[size_t(p)].numel;
    EXPECT_EQ(std::to_string(numel), r.at("params"));
  }
  for (const Node& n : g.nodes)
    EXPECT_TRUE(listed.count(n.name) || GetParam().extra_nodes.count(n.name)) << "unlisted node " << n.name;
}

TEST_P(ZooTest, OutputsAreLogits) {
  const Graph g = build();
  const int classes = GetParam().model == std::string("lenet") ? 10 : 1000;
  ASSERT_EQ(g.outputs.size(), GetParam().aux ? 2u : 1u);
  EXPECT_EQ(g.output_node(0).out, (Dims{classes, 1, 1}));
  EXPECT_EQ(g.output_node(0).kind, OpKind::fc);
  EXPECT_FLOAT_EQ(g.outputs[0].loss_weight, 1.0f);
  if (GetParam().aux) {
    EXPECT_EQ(g.output_node(1).name, "AuxLogits.fc");
    EXPECT_EQ(g.output_node(1).out, (Dims{classes, 1, 1}));
    EXPECT_FLOAT_EQ(g.outputs[1].loss_weight, 0.4f);
  }
}

TEST_P(ZooTest, ClassCountChangesOnlyTheClassifier) {
  const Graph a = build();
  ModelOptions o;
  o.classes = 7;
  const Graph b = build(o);
  EXPECT_EQ(b.output_node(0).out, (Dims{7, 1, 1}));
  ASSERT_EQ(a.params.size(), b.params.size());
  const std::vector<std::string>& cls = GetParam().classifier;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const ParamTensor& pa = a.params[i];
    const ParamTensor& pb = b.params[i];
    EXPECT_EQ(pa.name, pb.name);
    const bool is_classifier = std::find(cls.begin(), cls.end(), pa.name) != cls.end();
    if (is_classifier) {
      EXPECT_EQ(pb.shape[0], 7) << pb.name;
      EXPECT_EQ(pb.numel * size_t(pa.shape[0]), pa.numel * 7) << pb.name;
    } else {
      EXPECT_EQ(pa.shape, pb.shape) << pa.name;
    }
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  std::set<int> logits;
  for (const Output& out : a.outputs) logits.insert(out.node);
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    if (logits.count(int(i))) continue;
    EXPECT_EQ(a.nodes[i].out, b.nodes[i].out) << a.nodes[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ZooTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.model) + (i.param.aux ? "_aux" : "");
                         });

TEST(Zoo, ModelNames) {
  EXPECT_EQ(model_names(), (std::vector<std::string>{"lenet", "mobilenet_v1", "inception_v3"}));
  for (const std::string& m : model_names()) EXPECT_EQ(build_model(m).model, m);
}

TEST(Zoo, UnknownModelListsKnownOnes) {
  const std::string msg = invalid_argument_of([] { build_model("resnet50"); });
  EXPECT_TRUE(contains(msg, "resnet50")) << msg;
  for (const std::string& m : model_names()) EXPECT_TRUE(contains(msg, m)) << msg;
}

TEST(Zoo, DefaultDropoutRatesAndOverride) {
  auto rate = [](const Graph& g, const char* node) { return g.nodes[size_t(node_index(g, node))].dropout.rate; };
  EXPECT_FLOAT_EQ(rate(build_model("lenet"), "dropout"), 0.5f);
  EXPECT_FLOAT_EQ(rate(build_model("mobilenet_v1"), "Dropout_1b"), 1e-3f);
  EXPECT_FLOAT_EQ(rate(build_model("inception_v3"), "dropout"), 0.5f);
  ModelOptions o;
  o.dropout = 0;
  EXPECT_FLOAT_EQ(rate(build_model("lenet", o), "dropout"), 0.0f);
  o.dropout = 0.2f;
  EXPECT_FLOAT_EQ(rate(build_model("inception_v3", o), "dropout"), 0.2f);
  o.dropout = 1;
  EXPECT_TRUE(contains(invalid_argument_of([&] { build_model("lenet", o); }), "[0, 1)"));
}

TEST(Zoo, SmallerImagesKeepTheParameters) {
  for (int size : {32, 64, 128}) {
    const Graph g = build_model("mobilenet_v1", {.image_size = size});
    EXPECT_EQ(g.input_dims(), (Dims{3, size, size}));
    EXPECT_EQ(g.param_count, 4231976u) << size;
    EXPECT_EQ(g.nodes[size_t(node_index(g, "Conv2d_13_pointwise"))].out, (Dims{1024, size / 32, size / 32}));
  }
  for (int size : {75, 139, 320}) {
    const Graph g = build_model("inception_v3", {.image_size = size});
    EXPECT_EQ(g.input_dims(), (Dims{3, size, size}));
    EXPECT_EQ(g.param_count, 23834568u) << size;
    EXPECT_EQ(g.output_node().out, (Dims{1000, 1, 1}));
  }
  // At 400 px the aux head's 5x5 conv gives 2x2, pooled to 1x1 as in torchvision.
  const Graph g = build_model("inception_v3", {.image_size = 400, .aux_logits = true});
  EXPECT_EQ(g.param_count, 27161264u);
  EXPECT_EQ(g.output_node(1).out, (Dims{1000, 1, 1}));
}

TEST(Zoo, BadOptionsSayWhatIsAllowed) {
  auto err = [](const char* model, int size, bool aux = false) {
    return invalid_argument_of([&] { build_model(model, {.image_size = size, .aux_logits = aux}); });
  };
  EXPECT_TRUE(contains(err("lenet", 32), "28")) << err("lenet", 32);
  EXPECT_TRUE(contains(err("mobilenet_v1", 100), "multiple of 32")) << err("mobilenet_v1", 100);
  EXPECT_EQ(err("mobilenet_v1", 0), "") << "0 is the default";
  EXPECT_TRUE(contains(err("inception_v3", 74), "at least 75")) << err("inception_v3", 74);
  EXPECT_EQ(err("inception_v3", 75), "");
  EXPECT_TRUE(contains(err("inception_v3", 298, true), "at least 299")) << err("inception_v3", 298, true);
  EXPECT_TRUE(contains(err("inception_v3", -1), "image_size")) << err("inception_v3", -1);
  EXPECT_TRUE(contains(err("lenet", 28, true), "only available for inception_v3"));
  ModelOptions o;
  o.classes = -3;
  EXPECT_TRUE(contains(invalid_argument_of([&] { build_model("lenet", o); }), "classes"));
}

// Graph's own shape checks, which the zoo relies on.

// A convolution to `out_channels` with a `k` x `k` kernel, stride 1, no padding.
ConvSpec conv_spec(int out_channels, int k) {
  ConvSpec s;
  s.out_channels = out_channels;
  s.kh = s.kw = k;
  return s;
}

TEST(GraphShapes, KernelLargerThanInput) {
  Graph g;
  const int x = g.input({3, 4, 4});
  ConvSpec s = conv_spec(8, 5);
  const std::string msg = invalid_argument_of([&] { g.conv(x, "big", s); });
  EXPECT_TRUE(contains(msg, "'big'")) << msg;
  EXPECT_TRUE(contains(msg, "larger than the padded input")) << msg;
  s.pad = Pads::same(1);  // 4 + 2 >= 5: fits
  EXPECT_EQ(g.nodes[size_t(g.conv(x, "fits", s))].out, (Dims{8, 2, 2}));
  PoolSpec p;
  p.kh = p.kw = 3;
  p.stride_h = p.stride_w = 1;
  Graph h;
  const int y = h.input({1, 2, 2});
  EXPECT_TRUE(contains(invalid_argument_of([&] { h.max_pool(y, "pool", p); }), "larger")) << "3x3 pool on 2x2";
  p.pad = Pads::same(3);
  EXPECT_TRUE(contains(invalid_argument_of([&] { h.avg_pool(y, "pool", p); }), "smaller than the kernel"));
}

TEST(GraphShapes, GroupsMustDivideChannels) {
  Graph g;
  const int x = g.input({6, 8, 8});
  ConvSpec s;
  s.out_channels = 8;
  s.groups = 4;  // 6 % 4 != 0
  const std::string msg = invalid_argument_of([&] { g.conv(x, "grouped", s); });
  EXPECT_TRUE(contains(msg, "'grouped'")) << msg;
  EXPECT_TRUE(contains(msg, "groups (4)")) << msg;
  s.groups = 3;
  s.out_channels = 4;  // 4 % 3 != 0
  EXPECT_TRUE(contains(invalid_argument_of([&] { g.conv(x, "grouped", s); }), "groups (3)"));
  s.groups = 6;
  s.out_channels = 6;
  const int dw = g.conv(x, "dw", s);
  EXPECT_EQ(g.params[size_t(g.nodes[size_t(dw)].params[0])].kind, "dwconv_w");
  EXPECT_EQ(g.params[size_t(g.nodes[size_t(dw)].params[0])].shape, (std::vector<int>{6, 1, 1, 1}));
}

TEST(GraphShapes, ConcatNeedsEqualSpatialSizes) {
  Graph g;
  const int x = g.input({4, 8, 8});
  ConvSpec s = conv_spec(2, 3);
  const int a = g.conv(x, "a", s);  // 2x6x6
  s.kh = s.kw = 1;
  const int b = g.conv(x, "b", s);  // 2x8x8
  EXPECT_TRUE(contains(invalid_argument_of([&] { g.concat({a, b}, "cat"); }), "height/width"));
  EXPECT_TRUE(contains(invalid_argument_of([&] { g.relu(x, "a"); }), "duplicate"));
}

}  // namespace
}  // namespace ringbench::models
