#include "runner/tune/tune_cmd.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "base/output_file.h"
#include "runner/predict/model_check.h"
#include "runner/predict/predictions.h"
#include "runner/analysis/run.h"
#include "runner/analysis/format.h"
#include "runner/sweep/sweep_cmd.h"
#include "runner/sweep/sweep_config.h"
#include "runner/sweep/sweep_exec.h"
#include "runner/tune/cpu_term.h"
#include "runner/tune/tune_model.h"

namespace ringbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string utc_stamp() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

SweepConfig config_of(const TuneArgs& a) {
  if (!a.config.empty()) {
    if (!a.model.empty()) throw Error("give either a CONFIG or --model, not both");
    return load_sweep_config(a.config);
  }
  if (a.model.empty()) throw Error("name a sweep config (its train lists are the search space) or --model");
  std::string nodes;
  for (int n : a.nodes) nodes += (nodes.empty() ? "" : ", ") + std::to_string(n);
  const std::string yaml = "name: tune-" + a.model + "\nnodes: [" + nodes + "]\ntransports: [" + a.transport +
                           "]\ncluster: {type: " + a.cluster + (a.cluster == "emulated" ? ", link: " + a.link : "") +
                           "}\ntrain: {models: [{model: " + a.model + ", batch: " + std::to_string(a.batch) +
                           ", image_size: " + std::to_string(a.image_size) + "}], steps: " + std::to_string(a.steps) +
                           ", warmup: " + std::to_string(a.warmup) + ", " + tune::kIssueGrid + "}\n";
  return parse_sweep_config(yaml, "tune's options");
}

// A sweep run in this process into `dir`, its config written there first; the run loaded back.
report::Run sweep(const SweepConfig& c, const std::string& dir, const std::string& what) {
  const std::string path = dir + ".yaml";
  write_file_atomic(path, to_yaml(c));
  std::printf("# tune: %s: ringbench sweep %s --out %s\n", what.c_str(), path.c_str(), dir.c_str());
  std::fflush(stdout);
  SweepArgs s;
  s.config = path;
  s.out = dir;
  const int rc = run_sweep(s, {"ringbench", "sweep", path, "--out", dir});
  if (rc != 0) std::printf("# tune: the %s sweep had failed points (exit %d); continuing with what it measured\n",
                           what.c_str(), rc);
  return report::load_run(dir, 0.10);
}

SweepConfig sub_sweep(const SweepConfig& c, const std::string& suffix) {
  SweepConfig s = c;
  s.name = c.name + "-" + suffix;
  s.has_collectives = s.has_sharing = s.has_infer = s.has_migrate = false;
  return s;
}

// One allreduce size sweep per N >= 2 and transport.
SweepConfig allreduce_probe(const SweepConfig& c, const std::string& max_bytes) {
  SweepConfig s = sub_sweep(c, "probe-allreduce");
  s.nodes.erase(std::remove(s.nodes.begin(), s.nodes.end(), 1), s.nodes.end());
  s.repeats = 1;
  s.has_train = false;
  s.has_collectives = true;
  s.collectives = CollectivesSweep{};
  s.collectives.min_bytes = "4K";
  s.collectives.max_bytes = max_bytes;
  s.collectives.iters = 10;
  s.collectives.warmup_iters = 3;
  return s;
}

const report::Point* one_rank_point(const report::Run& run, const SweepModel& m) {
  for (const auto& p : run.points)
    if (p.kind == PointKind::train && p.model == m.model && p.batch == m.batch && p.image_size == m.image_size &&
        p.nodes == 1 && p.status() == "ok")
      return &p;
  return nullptr;
}

const predict::TransportFit* ring_fit(const std::vector<predict::TransportFit>& fits, const std::string& t, int n) {
  for (const auto& f : fits)
    if (f.transport == t && f.nodes == n && f.fit.algo == "ring") return &f;
  return nullptr;
}

struct Trial {
  tune::Ranked setting;
  double predicted_img_s = 0;
  std::vector<double> measured;  // total img/s per repeat
  double median() const { return measured.empty() ? 0 : report::median(measured); }
};

json trial_json(const Trial& t) {
  json knobs = json::object();
  for (const auto& k : tune::modelled_knobs())
    knobs[k] = axis_json(sweep_axes()[axis_index(k)], t.setting.axes[axis_index(k)]);
  return {{"settings", knobs}, {"default", t.setting.is_default}, {"predicted_step_s", t.setting.step_s},
          {"predicted_link_step_s", t.setting.link_step_s}, {"predicted_core_step_s", t.setting.core_step_s},
          {"cpu_charge_s", t.setting.cpu_charge_s}, {"wire_bytes_per_step", t.setting.wire_bytes},
          {"predicted_img_s", t.predicted_img_s}, {"measured_img_s", t.measured},
          {"measured_img_s_median", t.measured.empty() ? json(nullptr) : json(t.median())}};
}

// Tunes one (model, N, transport): measures the candidates and prints the outcome.
json tune_point(const SweepConfig& c, const SweepModel& m, int n, const std::string& t,
                const std::vector<tune::Ranked>& ranked, const TuneArgs& a, const std::string& dir) {
  std::vector<Trial> trials;
  for (const auto& r : tune::candidates(ranked, a.top_k)) trials.push_back({r, double(n) * m.batch / r.step_s, {}});
  SweepConfig s = sub_sweep(c, "measure");
  s.nodes = {n};
  s.transports = {t};
  s.train.models = {m};
  s.repeats = a.repeats;
  s.train.axes.settings.clear();
  for (const auto& tr : trials) s.train.axes.settings.push_back(tr.setting.axes);
  double expected = 0;
  for (const auto& tr : trials) expected += (s.train.warmup + s.train.steps) * tr.setting.step_s + 5;
  std::printf("# tune: %s b%d N=%d %s: measuring %zu settings x %d repeats, alternating; expected about %.0f s "
              "(predicted steps and ~5 s start-up a point)\n",
              m.model.c_str(), m.batch, n, t.c_str(), trials.size(), a.repeats, expected * a.repeats);
  const report::Run run = sweep(s, dir, "measurement");
  for (const auto& p : run.points)
    for (auto& tr : trials)
      if (p.kind == PointKind::train && p.axes == tr.setting.axes)
        for (const auto& [rep, v] : p.total) tr.measured.push_back(v);
  const auto def = std::find_if(trials.begin(), trials.end(), [](const Trial& x) { return x.setting.is_default; });
  const auto best = std::max_element(trials.begin(), trials.end(),
                                     [](const Trial& x, const Trial& y) { return x.median() < y.median(); });
  std::printf("\n| %s b%d N=%d %s | predicted img/s | CPU term ms/step | measured img/s (median of %d, range) | vs defaults |\n"
              "|---|---:|---:|---:|---:|\n",
              m.model.c_str(), m.batch, n, t.c_str(), a.repeats);
  for (const auto& tr : trials) {
    std::string spread = tr.measured.empty() ? "failed" : report::fixed(tr.median(), 1);
    if (tr.measured.size() > 1)
      spread += " (" + report::fixed(*std::min_element(tr.measured.begin(), tr.measured.end()), 1) + " to " +
                report::fixed(*std::max_element(tr.measured.begin(), tr.measured.end()), 1) + ")";
    const bool both = def->median() > 0 && tr.median() > 0;
    std::printf("| %s%s%s | %.1f | %.2f | %s | %s |\n", &tr == &*best ? "**chosen**: " : "",
                tune::setting_text(tr.setting.axes).c_str(), tr.setting.is_default ? " (defaults)" : "",
                tr.predicted_img_s, tr.setting.cpu_charge_s * 1e3, spread.c_str(), both ? (report::fixed(tr.median() / def->median(), 3) + "x").c_str() : "-");
  }
  json out = {{"model", m.model}, {"batch", m.batch}, {"image_size", m.image_size}, {"nodes", n}, {"transport", t},
              {"run_dir", dir}, {"candidates_ranked", ranked.size()}, {"trials", json::array()}};
  for (const auto& tr : trials) out["trials"].push_back(trial_json(tr));
  if (best->median() > 0) out["chosen"] = trial_json(*best);
  if (best->median() > 0 && def->median() > 0) out["speedup_over_defaults"] = best->median() / def->median();
  return out;
}

}  // namespace

SweepConfig timeline_probe(const SweepConfig& c, int steps) {
  SweepConfig s = sub_sweep(c, "probe-timeline");
  int smallest = 0;
  for (int n : c.nodes)
    if (n > 1 && (smallest == 0 || n < smallest)) smallest = n;
  s.cluster.cpus_per_node = local_cpus_per_node(c, std::max(smallest, 1));
  s.nodes = {1};
  s.repeats = 1;
  s.train.steps = steps;
  std::vector<std::string> unfused = axis_defaults();
  for (size_t i : axes_of(PointKind::train)) unfused[i] = c.train.axes.values[i].front();
  unfused[axis_index("fusion_mb")] = "0";
  s.train.axes.settings = {unfused};
  return s;
}

void add_tune_options(CLI::App& cmd, TuneArgs& a) {
  cmd.add_option("config", a.config, "A sweep config: its cluster, nodes, transports and train models, and its train "
                 "lists of fusion_mb, first_bucket_mb, compression and segment as the search space");
  cmd.add_option("--model", a.model, "Without a config: the model to tune (the search space is fusion_mb {1,4,16,64} "
                 "x first_bucket_mb {0.25,1,4} x compression {none,fp16} x segment {256K,1M,4M})");
  cmd.add_option("--batch", a.batch, "Without a config: images per rank per step")->capture_default_str();
  cmd.add_option("--image-size", a.image_size, "Without a config: image size (0: the model's)")->capture_default_str();
  cmd.add_option("--transport", a.transport, "Without a config: the transport")->capture_default_str();
  cmd.add_option("--nodes", a.nodes, "Without a config: node counts to tune at")->capture_default_str();
  cmd.add_option("--cluster", a.cluster, "Without a config: local or emulated")->capture_default_str();
  cmd.add_option("--link", a.link, "Without a config: the emulated cluster's link rate")->capture_default_str();
  cmd.add_option("--steps", a.steps, "Without a config: measured steps per point")->capture_default_str();
  cmd.add_option("--warmup", a.warmup, "Without a config: warmup steps per point")->capture_default_str();
  cmd.add_option("--top-k", a.top_k, "Settings measured besides the defaults, best predicted first")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cmd.add_option("--repeats", a.repeats, "Alternating repeats of each measured setting")
      ->capture_default_str()->check(CLI::Range(1, 100));
  cmd.add_option("--probe-steps", a.probe_steps, "Steps of the one-rank timeline probe")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd.add_option("--out", a.out, "Directory for the probes' and measurements' runs and tune.json "
                 "(default: results/tune-<name>-<UTC time>)");
}

int run_tune(const TuneArgs& a) {
  const auto start = Clock::now();
  const SweepConfig c = config_of(a);
  if (!c.has_train) throw Error("tune: the config has no train section: nothing to tune");
  if (c.cluster.type == "mpirun") throw Error("tune: runs local and emulated clusters (mpirun: not yet)");
  if (std::none_of(c.nodes.begin(), c.nodes.end(), [](int n) { return n > 1; }))
    throw Error("tune: nodes must hold a count >= 2: one rank has no communication to tune");
  const std::string dir = a.out.empty() ? "results/" + c.name + "-tune-" + utc_stamp() : a.out;
  if (fs::exists(dir)) throw Error("tune: " + dir + " already exists; choose another --out");
  fs::create_directories(dir);
  const report::Run timelines = sweep(timeline_probe(c, a.probe_steps), dir + "/probe-timeline", "timeline probe");
  std::vector<predict::StepTimeline> probed;
  for (const auto& m : c.train.models) {
    std::string ignored;
    const report::Point* one = one_rank_point(timelines, m);
    if (auto t = one ? predict::mean_timeline(*one, ignored) : std::nullopt) probed.push_back(*t);
  }
  const report::Run allreduce =
      sweep(allreduce_probe(c, tune::probe_max_bytes(probed)), dir + "/probe-allreduce", "allreduce probe");
  const auto fits = predict::check_model(allreduce).fits;
  const double probe_s = std::chrono::duration<double>(Clock::now() - start).count();
  json doc = {{"config", to_json(c)}, {"probe_s", probe_s}, {"points", json::array()}};
  for (const auto& m : c.train.models) {
    const report::Point* one = one_rank_point(timelines, m);
    std::string why = "its one-rank probe failed";
    const auto timeline = one ? predict::mean_timeline(*one, why) : std::nullopt;
    for (int n : c.nodes)
      for (const auto& t : c.transports) {
        if (n == 1) continue;
        const predict::TransportFit* f = ring_fit(fits, t, n);
        if (!timeline || !f) {
          const std::string reason = !timeline ? why : "no ring allreduce of ours measured on " + t + " at N=" +
                                                           std::to_string(n) + " (the baselines have no cost model)";
          std::printf("# tune: %s N=%d %s: not tuned: %s\n", m.model.c_str(), n, t.c_str(), reason.c_str());
          doc["points"].push_back({{"model", m.model}, {"nodes", n}, {"transport", t}, {"not_tuned", reason}});
          continue;
        }
        const tune::CpuTerm cpu = tune::cpu_term(allreduce, t, n, local_cpus_per_node(c, n), c.cluster.ranks_per_node);
        std::printf("# tune: %s N=%d %s: alpha %.1f us, beta %.3f ns/B; %s\n", m.model.c_str(), n, t.c_str(),
                    f->fit.alpha_s * 1e6, f->fit.beta_s * 1e9, tune::describe(cpu).c_str());
        const auto ranked = tune::rank_settings(*timeline, c.train.axes, tune::ring_cost(f->fit, n), cpu);
        const std::string sub = dir + "/measure-" + m.model + "-n" + std::to_string(n) + "-" + t;
        doc["points"].push_back(tune_point(c, m, n, t, ranked, a, sub));
        doc["points"].back()["fit"] = {{"alpha_s", f->fit.alpha_s}, {"beta_s_per_byte", f->fit.beta_s}};
        doc["points"].back()["cpu_term"] = cpu.to_json();
      }
  }
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  doc["wall_s"] = wall_s;
  write_file_atomic(dir + "/tune.json", doc.dump(1) + "\n");
  std::printf("\n# tune: search took %.0f s (probes %.0f s); wrote %s/tune.json\n", wall_s, probe_s, dir.c_str());
  return 0;
}

}  // namespace ringbench
