#include "runner/sweep/model_entry.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "models/zoo.h"
#include "runner/record/point.h"

namespace ringbench {

void fail_missing_model(const YamlReader& r, const std::string& where) {
  r.fail(where + ".model", "missing; one of: " + join_names(models::model_names()));
}

void check_model_entry(const YamlReader& r, const std::string& where, const std::string& model, int image_size) {
  const std::vector<std::string> known = models::model_names();
  if (std::find(known.begin(), known.end(), model) == known.end())
    r.fail(where + ".model", quote_excerpt(model) + " is not one of: " + join_names(known));
  try {
    models::build_model(model, {0, image_size, false, -1});
  } catch (const std::exception& e) {
    r.fail(where + ".image_size", e.what());
  }
}

void read_train_model(const YamlReader& r, const YAML::Node& node, const std::string& where, std::string& model,
                      int& batch, int& image_size) {
  if (node.IsScalar()) {
    model = node.as<std::string>();
  } else {
    YamlReader mr(node, where, r.origin());
    mr.only({"model", "batch", "image_size"});
    if (!mr.has("model")) fail_missing_model(mr, where);
    mr.get("model", model, "a string");
    mr.get_int("batch", batch, 1, kMaxBatch);
    mr.get_int("image_size", image_size, 0, kMaxImageSize);
  }
  check_model_entry(r, where, model, image_size);
}

}  // namespace ringbench
