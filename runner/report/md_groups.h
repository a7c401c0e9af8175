// A section's points cut into the groups it makes a table or subsection of (md_train.cc,
// md_vgpu.cc). points_of() sorts by model, then batch and image size, so each group is one
// stretch of consecutive points.
#pragma once

#include <vector>

#include "runner/analysis/run.h"

namespace ringbench::report {

// `pts` cut wherever same(first point of the group, next point) is false; order kept.
template <class Same>
std::vector<std::vector<const Point*>> consecutive_groups(const std::vector<const Point*>& pts, Same same) {
  std::vector<std::vector<const Point*>> groups;
  for (const Point* p : pts) {
    if (groups.empty() || !same(*groups.back().front(), *p)) groups.emplace_back();
    groups.back().push_back(p);
  }
  return groups;
}

// One group per model.
inline std::vector<std::vector<const Point*>> by_model(const std::vector<const Point*>& pts) {
  return consecutive_groups(pts, [](const Point& a, const Point& b) { return a.model == b.model; });
}

// One group per training configuration (batch, image size, every sweep axis's value) of a model's
// points.
inline std::vector<std::vector<const Point*>> by_config(const std::vector<const Point*>& pts) {
  return consecutive_groups(pts, [](const Point& a, const Point& b) {
    return a.batch == b.batch && a.image_size == b.image_size && a.axes == b.axes;
  });
}

}  // namespace ringbench::report
