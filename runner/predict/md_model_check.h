// The model check as markdown: the allreduce fits and every train point's predicted and
// measured step. Shared by `ringbench predict` and report.md's "Model check" section.
#pragma once

#include <string>

#include "runner/predict/model_check.h"

namespace ringbench::predict {

// The fits' table: α, β (and its bandwidth), R² and the residuals.
std::string md_fits(const ModelCheck& mc);

// The check's table and its median and max |error|; "" when no train point has a timeline.
std::string md_check_rows(const ModelCheck& mc);

// report.md's section: "" when no train point could be checked (runs recorded before
// train wrote its step timeline keep their report as it was).
std::string md_model_check(const ModelCheck& mc);

}  // namespace ringbench::predict
