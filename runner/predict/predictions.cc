#include "runner/predict/predictions.h"

namespace ringbench::predict {

std::optional<StepTimeline> mean_timeline(const report::Point& p, std::string& why) {
  std::optional<StepTimeline> mean;
  int repeats = 0;
  for (const report::Record* r : p.ok()) {
    const auto t = timeline_of(*r, why);
    if (!t) return std::nullopt;
    if (!mean) mean = StepTimeline{0, 0, std::vector<BucketTiming>(t->buckets.size())};
    if (t->buckets.size() != mean->buckets.size()) return why = "its repeats have different buckets", std::nullopt;
    mean->compute_s += t->compute_s, mean->optimizer_s += t->optimizer_s;
    for (size_t b = 0; b < t->buckets.size(); ++b)
      mean->buckets[b].bytes = t->buckets[b].bytes, mean->buckets[b].ready_s += t->buckets[b].ready_s;
    ++repeats;
  }
  if (!mean) return why = "no ok repeat", std::nullopt;
  mean->compute_s /= repeats, mean->optimizer_s /= repeats;
  for (auto& b : mean->buckets) b.ready_s /= repeats;
  return mean;
}

LinkCurve link_curve(const StepTimeline& t, const LinkCost& link, const std::string& fit,
                     const std::vector<int>& nodes) {
  LinkCurve c{link, fit, scaling_curve(t, link, nodes), latency_dominates_above(t, link), {}, {}};
  c.hd_from = hd_wins_from(c.curve);
  return c;
}

namespace {

// Per transport, the ring fit over every N, else the only N's.
std::vector<const TransportFit*> ring_fits(const std::vector<TransportFit>& fits) {
  std::vector<const TransportFit*> out;
  for (const auto& f : fits) {
    if (f.fit.algo != "ring") continue;
    int same = 0;
    for (const auto& o : fits) same += o.fit.algo == "ring" && o.transport == f.transport && o.nodes;
    if (f.nodes == 0 || same == 1) out.push_back(&f);
  }
  return out;
}

}  // namespace

std::vector<ModelPrediction> predict_run(const report::Run& run, const std::vector<TransportFit>& fits,
                                         const std::vector<int>& nodes) {
  std::vector<ModelPrediction> out;
  for (const report::Point* p : report::points_of(run, PointKind::train)) {
    std::string why;
    if (p->nodes != 1 || p->status() != "ok") continue;
    const auto t = mean_timeline(*p, why);
    if (!t) continue;
    ModelPrediction mp{p, *t, {}};
    for (const TransportFit* f : ring_fits(fits)) {
      std::string ns;
      for (const auto& o : fits)
        if (o.transport == f->transport && o.fit.algo == "ring" && o.nodes)
          ns += (ns.empty() ? "" : ",") + std::to_string(o.nodes);
      LinkCurve c = link_curve(*t, {f->transport, f->fit.alpha_s, f->fit.beta_s}, f->transport + " N=" + ns, nodes);
      for (const report::Point& q : run.points)
        if (q.kind == PointKind::train && q.same_config(*p) && q.transport == f->transport && q.efficiency)
          c.measured_efficiency[q.nodes] = q.efficiency->mean;
      mp.links.push_back(c);
    }
    if (!mp.links.empty()) out.push_back(mp);
  }
  return out;
}

}  // namespace ringbench::predict
