// A sweep config's model entry (train.models[i], infer.models[i]), checked where it is read.
#pragma once

#include <string>

#include "runner/record/yaml_reader.h"

namespace ringbench {

// "missing; one of: lenet, mobilenet_v1, inception_v3" for a missing model.
[[noreturn]] void fail_missing_model(const YamlReader& r, const std::string& where);

// The model must be one of the zoo's and accept `image_size` (0: its default); an Error naming
// `where`.model or `where`.image_size otherwise.
void check_model_entry(const YamlReader& r, const std::string& where, const std::string& model, int image_size);

// A model entry that trains, {model, batch, image_size} or a model's name alone (batch and
// image size then keep the values given), read and checked (check_model_entry).
void read_train_model(const YamlReader& r, const YAML::Node& node, const std::string& where, std::string& model,
                      int& batch, int& image_size);

}  // namespace ringbench
