#include "runner/sweep/model_entry.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "models/zoo.h"

namespace ringbench {

void fail_missing_model(const YamlReader& r, const std::string& where) {
  r.fail(where + ".model", "missing; one of: " + join_names(models::model_names()));
}

void check_model_entry(const YamlReader& r, const std::string& where, const std::string& model, int image_size) {
  const std::vector<std::string> known = models::model_names();
  if (std::find(known.begin(), known.end(), model) == known.end())
    r.fail(where + ".model", "'" + model + "' is not one of: " + join_names(known));
  try {
    models::build_model(model, {0, image_size, false, -1});
  } catch (const std::exception& e) {
    r.fail(where + ".image_size", e.what());
  }
}

}  // namespace ringbench
