// What the Inference section reads from an infer point's records (md_infer.cc,
// md_infer_vgpu.cc): LoadGen's verdict over repeats, and the VMs that served in a record.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "runner/analysis/records.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {

// LoadGen's verdict over the repeats: valid only if every run was; the reasons of all, in order.
struct Validity {
  bool valid = true;
  std::vector<std::string> reasons;

  void add(const json& result) {
    const json* v = find_at(result, "/validity");
    if (!v || !v->is_object()) return;
    valid = valid && bool_or(*v, "valid", false);
    if (const json* rs = find_at(*v, "/reasons"); rs && rs->is_array())
      for (const auto& r : *rs)
        if (r.is_string() && std::find(reasons.begin(), reasons.end(), r.get<std::string>()) == reasons.end())
          reasons.push_back(r.get<std::string>());
  }
  std::string text() const {
    std::string s;
    for (const auto& r : reasons) s += (s.empty() ? "" : ", ") + r;
    return valid ? "VALID" : "INVALID (" + s + ")";
  }
};

// The VMs that served in an infer record, each with its "offline", "single_stream", "server"
// and "device" as `ringbench infer` wrote them: every VM of a shared point (`vgpu share --
// infer`), or the one process of a point without a scheduler.
inline std::vector<const json*> served_vms(const Record& r) {
  std::vector<const json*> out;
  if (const json* vms = find_at(r.j, "/infer/vms"); vms && vms->is_array()) {
    for (const auto& v : *vms) out.push_back(&v);
  } else if (const json* one = find_at(r.j, "/infer"); one && one->is_object()) {
    out.push_back(one);
  }
  return out;
}

}  // namespace ringbench::report
