// A sweep config's model entry (train.models[i], infer.models[i]), checked where it is read.
#pragma once

#include <string>

#include "runner/sweep/yaml_reader.h"

namespace ringbench {

// "missing; one of: lenet, mobilenet_v1, inception_v3" for a missing model.
[[noreturn]] void fail_missing_model(const YamlReader& r, const std::string& where);

// The model must be one of the zoo's and accept `image_size` (0: its default); an Error naming
// `where`.model or `where`.image_size otherwise.
void check_model_entry(const YamlReader& r, const std::string& where, const std::string& model, int image_size);

}  // namespace ringbench
