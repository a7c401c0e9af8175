// The models ringbench trains, built from code: lenet (TF "Deep MNIST"), mobilenet_v1 (1.0)
// and inception_v3 (torchvision layout, optional aux head). Parameter counts match the
// published architectures exactly at their default sizes and 1000 (lenet: 10) classes.
#pragma once

#include <string>
#include <vector>

#include "models/graph.h"

namespace ringbench::models {

struct ModelOptions {
  int classes = 0;          // 0: the model's default (lenet 10, the others 1000)
  int image_size = 0;       // 0: the model's default (28, 224, 299); smaller sizes for tests
  bool aux_logits = false;  // inception_v3: the auxiliary head on Mixed_6e (loss weight 0.4)
  float dropout = -1;       // < 0: the model's default rate before the classifier
};

std::vector<std::string> model_names();
// Throws std::invalid_argument naming the known models, or what is wrong with the options.
Graph build_model(const std::string& name, const ModelOptions& opts = {});

}  // namespace ringbench::models
