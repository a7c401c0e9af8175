// The predictions as markdown and plots: report.md's "Predictions" section and `predict`'s output.
#pragma once

#include <string>
#include <vector>

#include "runner/predict/predictions.h"
#include "runner/analysis/plots.h"

namespace ringbench::predict {

// One model's table (efficiency per N, per transport: ring, hd, measured), its notes and its
// plot (plots/predict-<model>.svg when the plotter is enabled).
std::string md_model_prediction(const ModelPrediction& mp, report::Plotter* plotter);

// report.md's section: "" when no model has a one-rank timeline and a transport a ring fit.
std::string md_predictions(const report::Run& run, const std::vector<TransportFit>& fits, report::Plotter& plotter);

}  // namespace ringbench::predict
