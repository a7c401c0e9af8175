#include "runner/tune/autotune.h"

#include <algorithm>
#include <chrono>

#include "base/errors.h"
#include "base/output_file.h"
#include "runner/analysis/format.h"
#include "runner/predict/step_sim.h"
#include "runner/record/axes.h"

namespace ringbench::tune {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using report::fixed;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A shared number: the value every rank published, each checked (it came over the store).
std::vector<double> numbers(const std::vector<json>& all, const std::string& what) {
  std::vector<double> out;
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].is_number()) throw Error("autotune: rank " + std::to_string(r) + " shared a " + what + " that is not a number");
    out.push_back(all[r].get<double>());
  }
  return out;
}

double slowest(const AutotuneJob& job, const std::string& key, double mine) {
  const auto all = numbers(job.share(key, mine), key);
  return *std::max_element(all.begin(), all.end());
}

// This rank's mean unfused step: forward + backward, the optimizer, and each tensor's release
// time from the step's start.
json own_timeline(const std::vector<models::StepRecord>& steps) {
  double compute = 0, optimizer = 0;
  std::vector<double> ready(steps.front().bucket_ready_s.size(), 0.0);
  for (const auto& s : steps) {
    if (s.bucket_ready_s.size() != ready.size()) throw Error("autotune: the probe's steps have different buckets");
    compute += (s.forward_s + s.backward_s) / double(steps.size());
    optimizer += s.optimizer_s / double(steps.size());
    for (size_t b = 0; b < ready.size(); ++b) ready[b] += (s.forward_s + s.bucket_ready_s[b]) / double(steps.size());
  }
  return {{"compute_s", compute}, {"optimizer_s", optimizer}, {"ready_s", ready}};
}

// The job's timeline: compute and optimizer as the ranks' mean, each tensor ready when its last
// rank has it (train's summary.timeline does the same).
predict::StepTimeline job_timeline(const std::vector<json>& all, const std::vector<double>& bytes) {
  predict::StepTimeline t;
  for (auto& b : bytes) t.buckets.push_back({b, 0});
  for (size_t r = 0; r < all.size(); ++r) {
    const json& j = all[r];
    const auto bad = [&] { return Error("autotune: rank " + std::to_string(r) + " shared a malformed step timeline"); };
    if (!j.is_object() || !j.value("compute_s", json()).is_number() || !j.value("optimizer_s", json()).is_number() ||
        !j.value("ready_s", json()).is_array() || j["ready_s"].size() != bytes.size())
      throw bad();
    t.compute_s += j["compute_s"].get<double>() / double(all.size());
    t.optimizer_s += j["optimizer_s"].get<double>() / double(all.size());
    for (size_t b = 0; b < bytes.size(); ++b) {
      if (!j["ready_s"][b].is_number()) throw bad();
      t.buckets[b].ready_s = std::max(t.buckets[b].ready_s, j["ready_s"][b].get<double>());
    }
  }
  return t;
}

predict::StepTimeline probe_timeline(const AutotuneJob& job, const AutotuneOptions& o, std::vector<std::string> axes,
                                     int& steps) {
  axes[axis_index("fusion_mb")] = "0";
  job.apply(axes);
  job.step();  // the switch's first step
  std::vector<models::StepRecord> recs;
  for (int s = 0; s < o.steps; ++s) recs.push_back(job.step());
  steps += 1 + o.steps;
  return job_timeline(job.share("timeline", own_timeline(recs)), job.bucket_bytes());
}

double mean_of(const AutotuneJob& job, const std::string& key, double mine) {
  const auto all = numbers(job.share(key, mine), key);
  double sum = 0;
  for (double v : all) sum += v;
  return sum / double(all.size());
}

json cpus_json(const RankCpus& c) { return {{"host", c.host}, {"cpus", c.cpus}, {"compute_threads", c.compute_threads}}; }

RankCpus cpus_of(const json& j, size_t rank) {
  const auto bad = [&] { return Error("autotune: rank " + std::to_string(rank) + " shared malformed CPUs"); };
  if (!j.is_object() || !j.value("host", json()).is_string() || !j.value("cpus", json()).is_array() ||
      !j.value("compute_threads", json()).is_number_integer())
    throw bad();
  RankCpus c{j["host"].get<std::string>(), {}, j["compute_threads"].get<int>()};
  if (c.compute_threads < 0 || c.compute_threads > 4096 || j["cpus"].size() > 4096) throw bad();
  for (const auto& v : j["cpus"]) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1 << 20) throw bad();
    c.cpus.push_back(v.get<int>());
  }
  return c;
}

// The ring's α-β fit (the slowest rank's time per size) and the CPU term (the ranks' mean CPU per
// size, as `ringbench allreduce` rows carry it; the node from every rank's CPUs).
predict::CostFit probe_allreduce(const AutotuneJob& job, CpuTerm& cpu) {
  std::vector<predict::CostSample> samples;
  std::vector<std::pair<double, double>> cpu_samples;
  for (size_t bytes : probe_sizes(job.gradient_bytes)) {
    const AllreduceTiming t = job.allreduce(bytes);
    const std::string key = "allreduce/" + std::to_string(bytes);
    samples.push_back({job.nodes, double(bytes), slowest(job, key, t.seconds)});
    cpu_samples.push_back({double(bytes), mean_of(job, key + "/cpu", t.cpu_s)});
  }
  cpu = fit_cpu_term(cpu_samples, 0, 0, 0);
  std::vector<RankCpus> ranks;
  const auto all = job.share("cpus", cpus_json(job.cpus));
  for (size_t r = 0; r < all.size(); ++r) ranks.push_back(cpus_of(all[r], r));
  set_busiest_node(cpu, ranks, job.comm_threads_per_rank);
  return predict::fit_cost("ring", samples);
}

std::string row(const AutotuneSample& s, bool chosen) {
  std::string r = std::to_string(s.trial) + "," + std::to_string(s.repeat);
  for (const auto& k : modelled_knobs()) r += "," + s.axes[axis_index(k)];
  return r + "," + (s.is_default ? "1" : "0") + "," + fixed(s.predicted_img_s, 2) + "," + fixed(s.measured_img_s, 2) +
         "," + fixed(s.seconds, 6) + "," + (chosen ? "1" : "0") + "\n";
}

void write_log(const AutotuneJob& job, const AutotuneOptions& o, const AutotuneResult& r) {
  if (job.rank == 0 && !o.log.empty()) write_file_atomic(o.log, r.csv());
}

// One sample: the switch, a warm-up step, then `steps` timed; the slowest rank's time counts.
AutotuneSample sample(const AutotuneJob& job, const AutotuneOptions& o, const Ranked& c, int trial, int repeat) {
  job.apply(c.axes);
  job.step();
  const auto t0 = Clock::now();
  for (int s = 0; s < o.steps; ++s) job.step();
  const double secs = slowest(job, "sample/" + std::to_string(repeat) + "/" + std::to_string(trial), seconds_since(t0));
  const double img = double(job.nodes) * job.batch;
  return {trial, repeat, c.axes, c.is_default, img / c.step_s, img * o.steps / secs, secs};
}

}  // namespace

std::vector<size_t> probe_sizes(double gradient_bytes) {
  std::vector<size_t> out{4 << 10};
  while (double(out.back()) < std::max(gradient_bytes, double(1 << 20))) out.push_back(out.back() * 4);
  return out;
}

double AutotuneResult::median_img_s(const std::vector<std::string>& axes) const {
  std::vector<double> v;
  for (const auto& s : samples)
    if (s.axes == axes) v.push_back(s.measured_img_s);
  return report::median(v);
}

double AutotuneResult::predicted_img_s(const std::vector<std::string>& axes) const {
  for (const auto& s : samples)
    if (s.axes == axes) return s.predicted_img_s;
  return 0;
}

std::string AutotuneResult::csv() const {
  std::string out = "trial,repeat";
  for (const auto& k : modelled_knobs()) out += "," + k;
  out += ",default,predicted_img_s,measured_img_s,seconds,chosen\n";
  for (const auto& s : samples) out += row(s, !chosen.empty() && s.axes == chosen);
  return out;
}

json AutotuneResult::to_json() const {
  auto knobs = [](const std::vector<std::string>& axes) {
    json k = json::object();
    for (const auto& key : modelled_knobs()) k[key] = axis_json(sweep_axes()[axis_index(key)], axes[axis_index(key)]);
    return k;
  };
  json rows = json::array();
  for (const auto& s : samples)
    rows.push_back({{"trial", s.trial}, {"repeat", s.repeat}, {"settings", knobs(s.axes)}, {"default", s.is_default},
                    {"predicted_img_s", s.predicted_img_s}, {"measured_img_s", s.measured_img_s}, {"seconds", s.seconds}});
  const double def = median_img_s(defaults), best = median_img_s(chosen);
  return {{"tuned", true}, {"chosen", knobs(chosen)}, {"defaults", knobs(defaults)},
          {"predicted_img_s", predicted_img_s(chosen)}, {"measured_img_s_median", best},
          {"defaults_img_s_median", def}, {"speedup_over_defaults", def > 0 ? json(best / def) : json(nullptr)},
          {"fit", {{"alpha_s", fit.alpha_s}, {"beta_s_per_byte", fit.beta_s}, {"r2", fit.r2}}}, {"cpu_term", cpu.to_json()},
          {"settings_ranked", ranked}, {"steps", steps}, {"probe_s", probe_s}, {"wall_s", wall_s}, {"samples", rows}};
}

AutotuneResult autotune(const AutotuneJob& job, const AutotuneOptions& o, const AxisLists& space,
                        const std::vector<std::string>& start) {
  const auto t0 = Clock::now();
  AutotuneResult r;
  AxisLists searched = space;
  for (size_t i : axes_of(PointKind::train))
    if (std::find(modelled_knobs().begin(), modelled_knobs().end(), sweep_axes()[i].key) == modelled_knobs().end())
      searched.values[i] = {start[i]};
  const predict::StepTimeline timeline = probe_timeline(job, o, start, r.steps);
  r.fit = probe_allreduce(job, r.cpu);
  r.probe_s = seconds_since(t0);
  const auto ranked = rank_settings(timeline, searched, ring_cost(r.fit, job.nodes), r.cpu);
  r.ranked = ranked.size();
  const auto cands = candidates(ranked, o.top_k);
  for (const auto& c : cands)
    if (c.is_default) r.defaults = c.axes;
  job.say("# autotune: probe " + fixed(r.probe_s, 1) + " s (alpha " + fixed(r.fit.alpha_s * 1e6, 1) + " us, beta " +
          fixed(r.fit.beta_s * 1e9, 3) + " ns/B; " + describe(r.cpu) + "); " + std::to_string(r.ranked) +
          " settings ranked; measuring " +
          std::to_string(cands.size()) + " x " + std::to_string(o.repeats) + " samples of " + std::to_string(o.steps) +
          " steps, alternating");
  for (int rep = 0; rep < o.repeats; ++rep)
    for (size_t i = 0; i < cands.size(); ++i) {
      r.samples.push_back(sample(job, o, cands[i], int(i), rep));
      r.steps += 1 + o.steps;
      const auto& s = r.samples.back();
      job.say("# autotune: trial " + std::to_string(i) + " repeat " + std::to_string(rep) + ": " +
              setting_text(s.axes) + (s.is_default ? " (defaults)" : "") + ": predicted " +
              fixed(s.predicted_img_s, 1) + " img/s, measured " + fixed(s.measured_img_s, 1));
      write_log(job, o, r);
    }
  // The best median; ties keep the better predicted (earlier) candidate.
  double best = -1;
  for (const auto& c : cands)
    if (const double m = r.median_img_s(c.axes); m > best) best = m, r.chosen = c.axes;
  job.apply(r.chosen);
  r.wall_s = seconds_since(t0);
  write_log(job, o, r);
  return r;
}

}  // namespace ringbench::tune
