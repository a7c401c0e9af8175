#include "models/zoo.h"

#include <stdexcept>

namespace ringbench::models {

namespace {

enum class Padding { valid, same };  // same: pad (k - 1) / 2 per side, as the tables do at any stride

ConvSpec conv_spec(int out, int kh, int kw, int stride, Padding p, int groups = 1, bool bias = false) {
  ConvSpec s;
  s.out_channels = out;
  s.kh = kh;
  s.kw = kw;
  s.stride_h = s.stride_w = stride;
  if (p == Padding::same) s.pad = {(kh - 1) / 2, (kh - 1) / 2, (kw - 1) / 2, (kw - 1) / 2};
  s.groups = groups;
  s.bias = bias;
  return s;
}

PoolSpec pool_spec(int k, int stride, int pad = 0) {
  PoolSpec s;
  s.kh = s.kw = k;
  s.stride_h = s.stride_w = stride;
  s.pad = Pads::same(pad);
  return s;
}

[[noreturn]] void bad_option(const std::string& model, const std::string& why) {
  throw std::invalid_argument("model '" + model + "': " + why);
}

float dropout_rate(const ModelOptions& o, float fallback) {
  return o.dropout < 0 ? fallback : o.dropout;
}

Graph lenet(const ModelOptions& o) {
  Graph g;
  int x = g.input({1, o.image_size, o.image_size});
  x = g.conv(x, "conv0", conv_spec(32, 5, 5, 1, Padding::same, 1, true));
  x = g.relu(x, "conv0.relu");
  x = g.max_pool(x, "pool0", pool_spec(2, 2));
  x = g.conv(x, "conv1", conv_spec(64, 5, 5, 1, Padding::same, 1, true));
  x = g.relu(x, "conv1.relu");
  x = g.max_pool(x, "pool1", pool_spec(2, 2));
  x = g.fc(x, "affine0", {512, true});
  x = g.relu(x, "affine0.relu");
  // Deep MNIST's keep_prob 0.5 (tf_cnn_benchmarks' lenet5 has no dropout; the CSV follows it).
  x = g.dropout(x, "dropout", dropout_rate(o, 0.5f));
  g.add_output(g.fc(x, "affine1", {o.classes, true}));
  return g;
}

Graph mobilenet_v1(const ModelOptions& o) {
  const BatchNormSpec bn{1e-3f};
  Graph g;
  int x = g.input({3, o.image_size, o.image_size});
  auto conv_bn_relu6 = [&](int in, const std::string& name, const ConvSpec& s) {
    int y = g.conv(in, name, s);
    y = g.batch_norm(y, name + ".bn", bn);
    return g.relu6(y, name + ".relu6");
  };
  x = conv_bn_relu6(x, "Conv2d_0", conv_spec(32, 3, 3, 2, Padding::same));
  struct Block { int stride, out; };
  const Block blocks[] = {{1, 64},  {2, 128}, {1, 128}, {2, 256}, {1, 256}, {2, 512}, {1, 512},
                          {1, 512}, {1, 512}, {1, 512}, {1, 512}, {2, 1024}, {1, 1024}};
  int i = 1;
  for (const Block& b : blocks) {
    const int c = g.nodes[x].out.c;
    const std::string name = "Conv2d_" + std::to_string(i++);
    // The CSV pads stride-2 layers symmetrically by 1 (TF SAME pads 0,1); same output size.
    x = conv_bn_relu6(x, name + "_depthwise", conv_spec(c, 3, 3, b.stride, Padding::same, c));
    x = conv_bn_relu6(x, name + "_pointwise", conv_spec(b.out, 1, 1, 1, Padding::valid));
  }
  x = g.avg_pool(x, "AvgPool_1a", pool_spec(g.nodes[x].out.h, 1));
  x = g.dropout(x, "Dropout_1b", dropout_rate(o, 1e-3f));  // keras rate (slim: keep 0.999)
  g.add_output(g.fc(x, "Conv2d_1c_1x1", {o.classes, true}));  // a 1x1 conv with bias on 1x1
  return g;
}

// torchvision's Inception3: BasicConv2d = conv (no bias) + batch norm (eps 1e-3) + relu.
class Inception {
 public:
  explicit Inception(Graph& g) : g_(g) {}

  int conv(int x, const std::string& name, int out, int kh, int kw, int stride = 1,
           Padding p = Padding::same) {
    int y = g_.conv(x, name, conv_spec(out, kh, kw, stride, p));
    y = g_.batch_norm(y, name + ".bn", BatchNormSpec{1e-3f});
    return g_.relu(y, name + ".relu");
  }
  // 3x3/1 pad 1 average pool counting the padding in the divisor: torchvision's
  // F.avg_pool2d default (count_include_pad=True), unlike TF SAME pooling which excludes it.
  int avg_pool_3x3(int x, const std::string& name) {
    PoolSpec s = pool_spec(3, 1, 1);
    s.exclude_padding = false;
    return g_.avg_pool(x, name, s);
  }

  int block_a(int x, const std::string& n, int pool_features) {
    const int b1 = conv(x, n + ".branch1x1", 64, 1, 1);
    int b5 = conv(x, n + ".branch5x5_1", 48, 1, 1);
    b5 = conv(b5, n + ".branch5x5_2", 64, 5, 5);
    int b3 = conv(x, n + ".branch3x3dbl_1", 64, 1, 1);
    b3 = conv(b3, n + ".branch3x3dbl_2", 96, 3, 3);
    b3 = conv(b3, n + ".branch3x3dbl_3", 96, 3, 3);
    int bp = avg_pool_3x3(x, n + ".branch_pool.avgpool");
    bp = conv(bp, n + ".branch_pool", pool_features, 1, 1);
    return g_.concat({b1, b5, b3, bp}, n + ".concat");
  }
  int block_b(int x, const std::string& n) {
    const int b3 = conv(x, n + ".branch3x3", 384, 3, 3, 2, Padding::valid);
    int bd = conv(x, n + ".branch3x3dbl_1", 64, 1, 1);
    bd = conv(bd, n + ".branch3x3dbl_2", 96, 3, 3);
    bd = conv(bd, n + ".branch3x3dbl_3", 96, 3, 3, 2, Padding::valid);
    const int bp = g_.max_pool(x, n + ".branch_pool.maxpool", pool_spec(3, 2));
    return g_.concat({b3, bd, bp}, n + ".concat");
  }
  int block_c(int x, const std::string& n, int c7) {
    const int b1 = conv(x, n + ".branch1x1", 192, 1, 1);
    int b7 = conv(x, n + ".branch7x7_1", c7, 1, 1);
    b7 = conv(b7, n + ".branch7x7_2", c7, 1, 7);
    b7 = conv(b7, n + ".branch7x7_3", 192, 7, 1);
    int bd = conv(x, n + ".branch7x7dbl_1", c7, 1, 1);
    bd = conv(bd, n + ".branch7x7dbl_2", c7, 7, 1);
    bd = conv(bd, n + ".branch7x7dbl_3", c7, 1, 7);
    bd = conv(bd, n + ".branch7x7dbl_4", c7, 7, 1);
    bd = conv(bd, n + ".branch7x7dbl_5", 192, 1, 7);
    int bp = avg_pool_3x3(x, n + ".branch_pool.avgpool");
    bp = conv(bp, n + ".branch_pool", 192, 1, 1);
    return g_.concat({b1, b7, bd, bp}, n + ".concat");
  }
  int block_d(int x, const std::string& n) {
    int b3 = conv(x, n + ".branch3x3_1", 192, 1, 1);
    b3 = conv(b3, n + ".branch3x3_2", 320, 3, 3, 2, Padding::valid);
    int b7 = conv(x, n + ".branch7x7x3_1", 192, 1, 1);
    b7 = conv(b7, n + ".branch7x7x3_2", 192, 1, 7);
    b7 = conv(b7, n + ".branch7x7x3_3", 192, 7, 1);
    b7 = conv(b7, n + ".branch7x7x3_4", 192, 3, 3, 2, Padding::valid);
    const int bp = g_.max_pool(x, n + ".branch_pool.maxpool", pool_spec(3, 2));
    return g_.concat({b3, b7, bp}, n + ".concat");
  }
  // torchvision concatenates the split 1x3/3x1 pairs first; one flat concat has the same order.
  int block_e(int x, const std::string& n) {
    const int b1 = conv(x, n + ".branch1x1", 320, 1, 1);
    const int b3 = conv(x, n + ".branch3x3_1", 384, 1, 1);
    const int b3a = conv(b3, n + ".branch3x3_2a", 384, 1, 3);
    const int b3b = conv(b3, n + ".branch3x3_2b", 384, 3, 1);
    int bd = conv(x, n + ".branch3x3dbl_1", 448, 1, 1);
    bd = conv(bd, n + ".branch3x3dbl_2", 384, 3, 3);
    const int bda = conv(bd, n + ".branch3x3dbl_3a", 384, 1, 3);
    const int bdb = conv(bd, n + ".branch3x3dbl_3b", 384, 3, 1);
    int bp = avg_pool_3x3(x, n + ".branch_pool.avgpool");
    bp = conv(bp, n + ".branch_pool", 192, 1, 1);
    return g_.concat({b1, b3a, b3b, bda, bdb, bp}, n + ".concat");
  }
  int aux_logits(int x, int classes) {
    int y = g_.avg_pool(x, "AuxLogits.avgpool", pool_spec(5, 3));
    y = conv(y, "AuxLogits.conv0", 128, 1, 1);
    y = conv(y, "AuxLogits.conv1", 768, 5, 5, 1, Padding::valid);
    // torchvision's adaptive 1x1 average pool; a no-op (so absent) at 299 and 300.
    if (g_.nodes[y].out.h > 1 || g_.nodes[y].out.w > 1) {
      PoolSpec s;
      s.kh = g_.nodes[y].out.h;
      s.kw = g_.nodes[y].out.w;
      y = g_.avg_pool(y, "AuxLogits.adaptive_avgpool", s);
    }
    return g_.fc(y, "AuxLogits.fc", {classes, true});
  }

 private:
  Graph& g_;
};

Graph inception_v3(const ModelOptions& o) {
  Graph g;
  Inception b(g);
  int x = g.input({3, o.image_size, o.image_size});
  x = b.conv(x, "Conv2d_1a_3x3", 32, 3, 3, 2, Padding::valid);
  x = b.conv(x, "Conv2d_2a_3x3", 32, 3, 3, 1, Padding::valid);
  x = b.conv(x, "Conv2d_2b_3x3", 64, 3, 3);
  x = g.max_pool(x, "MaxPool_3a_3x3", pool_spec(3, 2));
  x = b.conv(x, "Conv2d_3b_1x1", 80, 1, 1);
  x = b.conv(x, "Conv2d_4a_3x3", 192, 3, 3, 1, Padding::valid);
  x = g.max_pool(x, "MaxPool_5a_3x3", pool_spec(3, 2));
  x = b.block_a(x, "Mixed_5b", 32);
  x = b.block_a(x, "Mixed_5c", 64);
  x = b.block_a(x, "Mixed_5d", 64);
  x = b.block_b(x, "Mixed_6a");
  x = b.block_c(x, "Mixed_6b", 128);
  x = b.block_c(x, "Mixed_6c", 160);
  x = b.block_c(x, "Mixed_6d", 160);
  x = b.block_c(x, "Mixed_6e", 192);
  const int aux = o.aux_logits ? b.aux_logits(x, o.classes) : -1;
  x = b.block_d(x, "Mixed_7a");
  x = b.block_e(x, "Mixed_7b");
  x = b.block_e(x, "Mixed_7c");
  PoolSpec global;
  global.kh = g.nodes[x].out.h;
  global.kw = g.nodes[x].out.w;
  x = g.avg_pool(x, "avgpool", global);
  x = g.dropout(x, "dropout", dropout_rate(o, 0.5f));
  g.add_output(g.fc(x, "fc", {o.classes, true}));
  if (aux >= 0) g.add_output(aux, 0.4f);
  return g;
}

}  // namespace

std::vector<std::string> model_names() { return {"lenet", "mobilenet_v1", "inception_v3"}; }

Graph build_model(const std::string& name, const ModelOptions& opts) {
  ModelOptions o = opts;
  if (o.classes < 0) bad_option(name, "classes must be positive (0 for the default)");
  if (o.image_size < 0) bad_option(name, "image_size must be positive (0 for the default)");
  if (!(o.dropout < 1)) bad_option(name, "dropout rate must be in [0, 1) (negative for the default)");
  if (o.aux_logits && name != "inception_v3")
    bad_option(name, "aux_logits is only available for inception_v3");
  Graph g;
  if (name == "lenet") {
    if (o.classes == 0) o.classes = 10;
    if (o.image_size == 0) o.image_size = 28;
    if (o.image_size != 28)
      bad_option(name, "image_size " + std::to_string(o.image_size) + " not supported; lenet takes 28x28 only");
    g = lenet(o);
  } else if (name == "mobilenet_v1") {
    if (o.classes == 0) o.classes = 1000;
    if (o.image_size == 0) o.image_size = 224;
    if (o.image_size < 32 || o.image_size % 32)
      bad_option(name, "image_size " + std::to_string(o.image_size) +
                           " not supported; use a multiple of 32, at least 32 (default 224)");
    g = mobilenet_v1(o);
  } else if (name == "inception_v3") {
    if (o.classes == 0) o.classes = 1000;
    if (o.image_size == 0) o.image_size = 299;
    const int min = o.aux_logits ? 299 : 75;
    if (o.image_size < min)
      bad_option(name, "image_size " + std::to_string(o.image_size) + " too small; use at least " +
                           std::to_string(min) +
                           (o.aux_logits ? " with aux_logits (its 5x5 conv needs a 17x17 Mixed_6e)"
                                         : " (default 299)"));
    g = inception_v3(o);
  } else {
    std::string known;
    for (const std::string& m : model_names()) known += (known.empty() ? "" : ", ") + m;
    throw std::invalid_argument("unknown model '" + name + "'; known models: " + known);
  }
  g.model = name;
  return g;
}

}  // namespace ringbench::models
