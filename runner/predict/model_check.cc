#include "runner/predict/model_check.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "base/errors.h"
#include "runner/predict/step_sim.h"
#include "runner/analysis/format.h"
#include "runner/record/axes.h"

namespace ringbench::predict {
namespace {

using report::json;
using report::Point;
using report::Record;

// Each (transport, N, algorithm)'s allreduce samples: one per size, the median over repeats. The
// baselines (MPI_Allreduce, NCCL) choose their own algorithms: no model of ours fits them; nor
// are the other collectives' points (allgather's ring moves half an allreduce's data) mixed in.
using SampleKey = std::tuple<std::string, int, std::string>;
std::map<SampleKey, std::vector<CostSample>> cost_samples(const report::Run& run) {
  std::map<SampleKey, std::vector<CostSample>> out;
  for (const Point* p : report::points_of(run, PointKind::collectives)) {
    if (!report::is_allreduce_point(*p)) continue;
    for (const auto& [bytes, s] : p->sizes)
      if (s.algos.size() == 1 && has_cost_model(*s.algos.begin()) && !s.time_us.empty() && p->nodes > 1)
        out[{p->transport, report::ranks_of(run, *p), *s.algos.begin()}].push_back(
            {report::ranks_of(run, *p), double(bytes), report::median(s.time_us) * 1e-6});
  }
  return out;
}

std::vector<TransportFit> fit_all(const report::Run& run) {
  std::vector<TransportFit> fits;
  std::map<std::pair<std::string, std::string>, std::vector<CostSample>> over_n;
  std::map<std::pair<std::string, std::string>, int> n_count;
  for (const auto& [key, samples] : cost_samples(run)) {
    const auto& [transport, nodes, algo] = key;
    if (samples.size() < 2) continue;
    fits.push_back({transport, nodes, fit_cost(algo, samples)});
    auto& all = over_n[{transport, algo}];
    all.insert(all.end(), samples.begin(), samples.end());
    ++n_count[{transport, algo}];
  }
  for (const auto& [key, samples] : over_n)
    if (n_count[key] > 1) fits.push_back({key.first, 0, fit_cost(key.second, samples)});
  return fits;
}

std::vector<double> numbers(const json* a) {
  std::vector<double> v;
  if (a && a->is_array())
    for (const auto& x : *a)
      if (x.is_number()) v.push_back(x.get<double>());
  return v;
}

}  // namespace

std::optional<StepTimeline> timeline_of(const Record& r, std::string& why) {
  const json* tl = report::find_at(r.j, "/train/summary/timeline");
  const auto fwd = report::number_at(r.j, "/train/summary/forward_s/mean_over_ranks");
  const auto bwd = report::number_at(r.j, "/train/summary/backward_s/mean_over_ranks");
  const auto opt = report::number_at(r.j, "/train/summary/optimizer_s/mean_over_ranks");
  if (!tl || !fwd || !bwd || !opt) {
    why = "no step timeline (recorded before ringbench 'train' wrote summary.timeline)";
    return std::nullopt;
  }
  const auto bytes = numbers(report::find_at(*tl, "/bucket_bytes"));
  const auto ready = numbers(report::find_at(*tl, "/bucket_ready_s"));
  if (bytes.size() != ready.size()) {
    why = "summary.timeline has " + std::to_string(bytes.size()) + " bucket sizes but " +
          std::to_string(ready.size()) + " ready times";
    return std::nullopt;
  }
  StepTimeline t{*fwd + *bwd, *opt, {}};
  for (size_t b = 0; b < bytes.size(); ++b) t.buckets.push_back({bytes[b], ready[b]});
  return t;
}

namespace {

std::string fit_name(const TransportFit& f, const std::vector<TransportFit>& fits) {
  if (f.nodes) return f.transport + " N=" + std::to_string(f.nodes);
  std::string ns;
  for (const auto& o : fits)
    if (o.transport == f.transport && o.nodes && o.fit.algo == f.fit.algo) ns += (ns.empty() ? "" : ",") + std::to_string(o.nodes);
  return f.transport + " N=" + ns;
}

std::string hier_name(const HierCost& c) {
  return c.transport + " hier " + std::to_string(c.nodes) + "x" + std::to_string(c.per_node) +
         (c.within ? "" : " (across only)") + (c.chunk_bytes ? " pipelined" : "");
}

// What prices a point's buckets: the flat fits at its N ranks, or one hierarchical cost.
struct Pricing {
  const std::vector<TransportFit>& fits;
  std::string transport;
  int ranks = 0;
  const HierCost* hier = nullptr;
};

// A point's step replayed from the timelines of `source`'s ok repeats (the point itself, or its
// one-node peer) at the point's N and transport: the mean prediction, or why there is none.
struct Replay {
  int repeats = 0;
  double step_s = 0, exposed_s = 0;
  std::vector<double> fitted_s;  // every bucket's fitted allreduce time, over the repeats
  std::string fit;
};
std::optional<Replay> replay(const Point& source, const Pricing& pr, std::string& why) {
  Replay out;
  for (const Record* r : source.ok()) {
    const auto t = timeline_of(*r, why);
    if (!t) return std::nullopt;
    std::string missing;
    auto cost = [&](double bytes) {
      if (pr.hier) {
        out.fit = hier_name(*pr.hier);
        out.fitted_s.push_back(pr.hier->seconds(bytes));
        return out.fitted_s.back();
      }
      const TransportFit* f = fit_for(pr.fits, pr.transport, pr.ranks, bytes);
      if (!f)
        return missing = "no allreduce of ours (ring, direct, rd) measured on " + pr.transport +
                         " in this run (the mpi and nccl baselines choose their own algorithms)",
               0.0;
      if (out.fit.empty() || bytes > kSmallMessageBytes) out.fit = fit_name(*f, pr.fits);
      out.fitted_s.push_back(f->fit.seconds(pr.ranks, bytes));
      return out.fitted_s.back();
    };
    const StepPrediction pred = simulate_step(*t, cost);
    if (!missing.empty()) return why = missing, std::nullopt;
    out.step_s += pred.step_s, out.exposed_s += pred.exposed_s;
    ++out.repeats;
  }
  if (out.repeats == 0) return why = "no ok repeat", std::nullopt;
  out.step_s /= out.repeats, out.exposed_s /= out.repeats;
  return out;
}

double mean_of(const Point& p, const char* pointer) {
  double sum = 0;
  for (const Record* r : p.ok()) sum += report::number_at(r->j, pointer).value_or(0);
  return p.ok().empty() ? 0 : sum / double(p.ok().size());
}

// Whether the point ran the hierarchical allreduce (train --hierarchical): its sweep axis, or its
// records' meta (a sweep's records keep only part of it).
bool ran_hierarchical(const Point& p) {
  if (p.axes[axis_index("hierarchical")] == "true") return true;
  for (const Record* r : p.ok())
    if (const json* h = report::find_at(r->j, "/train/meta/hierarchical"); h && h->is_boolean() && h->get<bool>())
      return true;
  return false;
}

// One train point (N >= 2) against its prediction, or why it cannot be checked.
std::optional<CheckRow> check_point(const report::Run& run, const Point& p, const ModelCheck& mc, std::string& why) {
  const int ranks = report::ranks_of(run, p);
  const bool hierarchical = ran_hierarchical(p);
  const HierCost* hier = find_cost(mc.hier, p.transport, p.nodes);
  if (hierarchical && !hier)
    return why = "ran --hierarchical, but the run has no flat ring of " + std::to_string(ranks) + " ranks on " +
                 p.transport + " to price its level across the nodes",
           std::nullopt;
  const Pricing pricing{mc.fits, p.transport, ranks, hierarchical ? hier : nullptr};
  const auto own = replay(p, pricing, why);
  if (!own) return std::nullopt;
  CheckRow row;
  row.point = &p;
  row.repeats = own->repeats;
  row.fit = own->fit;
  row.ranks = ranks;
  row.hierarchical = hierarchical;
  std::string ignored;
  if (!hierarchical && hier)
    if (const auto h = replay(p, Pricing{mc.fits, p.transport, ranks, hier}, ignored)) {
      row.predicted_hier_s = h->step_s;
      row.hier_fit = h->fit;
    }
  row.predicted_s = own->step_s, row.predicted_exposed_s = own->exposed_s;
  row.measured_s = mean_of(p, "/train/summary/step_s/mean_over_ranks");
  row.measured_exposed_s = mean_of(p, "/train/summary/exposed_s/mean_over_ranks");
  std::vector<double> in_situ;
  for (const Record* r : p.ok())
    for (double s : numbers(report::find_at(r->j, "/train/summary/timeline/bucket_allreduce_s"))) in_situ.push_back(s);
  double sum_in_situ = 0, sum_fitted = 0;
  for (double s : in_situ) sum_in_situ += s;
  for (double s : own->fitted_s) sum_fitted += s;
  if (sum_fitted > 0 && in_situ.size() == own->fitted_s.size()) row.in_situ_ratio = sum_in_situ / sum_fitted;
  const Point* one = report::find_peer(run.points, p, 1, "none");
  if (one && one->status() == "ok")
    if (const auto from_one = replay(*one, pricing, ignored)) row.predicted_from_one_node_s = from_one->step_s;
  return row;
}

std::vector<double> abs_errors(const std::vector<CheckRow>& rows) {
  std::vector<double> e;
  for (const auto& r : rows) e.push_back(std::fabs(r.error()));
  return e;
}

}  // namespace

const TransportFit* fit_for(const std::vector<TransportFit>& fits, const std::string& transport, int ranks,
                            double bytes) {
  const TransportFit *own = nullptr, *over_n = nullptr;
  for (const auto& f : fits) {
    if (f.transport != transport || (f.fit.algo == "ring") == (bytes <= kSmallMessageBytes)) continue;
    if (f.nodes == ranks) own = own ? own : &f;
    if (f.nodes == 0) over_n = over_n ? over_n : &f;
  }
  if (own || over_n) return own ? own : over_n;
  if (bytes <= kSmallMessageBytes) return fit_for(fits, transport, ranks, kSmallMessageBytes + 1);  // ring then
  return nullptr;
}

double ModelCheck::median_abs_error() const { return rows.empty() ? 0 : report::median(abs_errors(rows)); }

double ModelCheck::max_abs_error() const {
  const auto e = abs_errors(rows);
  return e.empty() ? 0 : *std::max_element(e.begin(), e.end());
}

ModelCheck check_model(const report::Run& run) {
  ModelCheck mc;
  mc.fits = fit_all(run);
  mc.hier = hierarchical_costs(run, mc.fits);
  for (const Point* p : report::points_of(run, PointKind::train)) {
    if (p->status() != "ok" || p->nodes < 2) continue;  // one node: the fits are of points of several nodes
    std::string why;
    if (auto row = check_point(run, *p, mc, why))
      mc.rows.push_back(*row);
    else
      mc.unchecked.push_back(report::label(*p, true) + ": " + why);
  }
  return mc;
}

}  // namespace ringbench::predict
