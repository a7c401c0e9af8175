// "Predictions": each model's scaling efficiency at N = 1..1024 per transport, from its one-rank
// timeline and the transport's fitted α and β (extrapolate.h), with the measured points beside.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/predict/extrapolate.h"
#include "runner/predict/model_check.h"

namespace ringbench::predict {

struct LinkCurve {
  LinkCost link;
  std::string fit;  // which fit priced it: "tcp N=2,4"; or the what-if's description
  std::vector<CurvePoint> curve;
  std::optional<double> latency_above;
  std::optional<int> hd_from;
  std::map<int, double> measured_efficiency;  // by N, where the run measured it (mean over repeats)
};

struct ModelPrediction {
  const report::Point* one_rank = nullptr;  // the N=1 point whose timeline is replayed
  StepTimeline timeline;                    // its mean over the ok repeats
  std::vector<LinkCurve> links;
};

// The N=1 point's mean timeline, or why there is none.
std::optional<StepTimeline> mean_timeline(const report::Point& p, std::string& why);

// Every train config with an N=1 timeline, over every transport with a ring fit in `fits`. The
// predictions point into `run` (and `fits` does not): it must outlive them.
std::vector<ModelPrediction> predict_run(const report::Run& run, const std::vector<TransportFit>& fits,
                                         const std::vector<int>& nodes);

LinkCurve link_curve(const StepTimeline& t, const LinkCost& link, const std::string& fit,
                     const std::vector<int>& nodes);

}  // namespace ringbench::predict
