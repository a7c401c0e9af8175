#include "runner/cli/train_autotune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/bytes.h"
#include "base/cpu_time.h"
#include "base/errors.h"
#include "base/output_file.h"
#include "runner/analysis/format.h"
#include "runner/job/metadata.h"
#include "runner/job/world.h"
#include "runner/migrate/target_process.h"
#include "runner/record/axes.h"
#include "runner/tune/autotune.h"
#include "runner/tune/cpu_term.h"

namespace ringbench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr double kMiB = 1 << 20;

// `a` with the setting's knobs.
TrainArgs with_knobs(TrainArgs a, const std::vector<std::string>& axes) {
  a.fusion_mb = std::stod(axes[axis_index("fusion_mb")]);
  a.first_bucket_mb = std::stod(axes[axis_index("first_bucket_mb")]);
  a.compression = axes[axis_index("compression")];
  a.segment = axes[axis_index("segment")];
  return a;
}

// The job as started: the searched knobs at train's defaults (validate_autotune_args), the
// precision as given (the compression auto means depends on it).
std::vector<std::string> start_axes(const TrainArgs& a) {
  std::vector<std::string> v = axis_defaults();
  v[axis_index("precision")] = a.precision;
  return v;
}

// Ring allreduces of fp32 zeros (the values do not change the time) in one buffer made for the
// largest size the probe takes.
class AllreduceProbe {
 public:
  AllreduceProbe(Communicator& comm, double gradient_bytes, std::chrono::milliseconds timeout) {
    const size_t max_bytes = tune::probe_sizes(gradient_bytes).back();
    buf_.assign(max_bytes / sizeof(float), 0.0f);
    AllreduceOptions o;
    o.algo = AllreduceAlgo::ring;  // the fit is the ring's
    o.ring.timeout = timeout;
    plan_ = comm.allreduce(buf_.data(), buf_.data(), buf_.size(), DType::f32, ReduceOp::sum, o);
  }
  // The compute threads are idle here, so the process's CPU time is the communication's.
  tune::AllreduceTiming run(size_t bytes) {
    const int iters = bytes >= (16u << 20) ? 3 : 5;
    plan_->run(bytes / sizeof(float), true);  // warm-up
    std::vector<double> t;
    const double cpu0 = process_cpu_seconds();
    for (int i = 0; i < iters; ++i) {
      const auto t0 = Clock::now();
      plan_->run(bytes / sizeof(float), true);
      t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return {report::median(t), (process_cpu_seconds() - cpu0) / iters};
  }

 private:
  std::vector<float> buf_;
  std::unique_ptr<AllreducePlan> plan_;
};

std::vector<json> share(const RankJob& job, const std::string& key, const json& mine) {
  const std::string k = "train/autotune/" + key + "/";
  job.store->set(k + std::to_string(job.rank), json{{"v", mine}}.dump());
  std::vector<json> all;
  for (int r = 0; r < job.n; ++r) all.push_back(get_rank_json(*job.store, k + std::to_string(r), r, 2 * job.timeout)["v"]);
  return all;
}

void say_chosen(const tune::AutotuneResult& r) {
  const double def = r.median_img_s(r.defaults), best = r.median_img_s(r.chosen);
  std::printf("# autotune: chose %s%s: predicted %.1f img/s, measured %.1f (median of its samples), %.3fx the "
              "defaults' %.1f; %d steps, %.1f s (probe %.1f s)\n",
              tune::setting_text(r.chosen).c_str(), r.chosen == r.defaults ? " (the defaults)" : "",
              r.predicted_img_s(r.chosen), best, def > 0 ? best / def : 0.0, def, r.steps, r.wall_s, r.probe_s);
  std::fflush(stdout);
}

}  // namespace

void validate_autotune_args(const TrainArgs& a) {
  if (!a.autotune) {
    if (!a.autotune_log.empty()) throw Error("--autotune-log needs --autotune");
    return;
  }
  const TrainArgs d;
  if (a.fusion_mb != d.fusion_mb || a.first_bucket_mb != d.first_bucket_mb || a.compression != d.compression ||
      a.segment != d.segment)
    throw Error("--autotune chooses --fusion-mb, --first-bucket-mb, --compression and --segment itself: leave them "
                "at their defaults");
  if (!is_ring(backend_for("--transport", a.transport, any_backend)))
    throw Error("--autotune tunes our ring: use --transport " + backend_names(is_ring) + " (" + a.transport +
                " has no segment, compression or cost model of ours)");
  if (a.epochs > 0) throw Error("--autotune with --epochs: the search's steps would not fit the epochs (use --steps)");
  if (a.migrate.at_step != 0) throw Error("--autotune with --migrate-at: not supported (the ring re-forms)");
  if (a.no_overlap) throw Error("--autotune with --no-overlap: its model prices overlapped steps");
  if (!a.autotune_log.empty()) check_output_path(a.autotune_log, "--autotune-log");
}

TrainArgs autotune_job(const AutotuneHooks& h, json& record) {
  const RankJob& job = h.job;
  if (job.n < 2 || !h.comm) throw Error("--autotune: one rank has no communication to tune (use --ranks 2 or more)");
  const double gradient_bytes = double(h.trainer.host_params().size()) * sizeof(float);
  AllreduceProbe probe(*h.comm, gradient_bytes, 2 * job.timeout);
  tune::AutotuneJob tj;
  tj.rank = job.rank;
  tj.nodes = job.n;
  tj.batch = h.a.batch;
  tj.gradient_bytes = gradient_bytes;
  tj.apply = [&](const std::vector<std::string>& axes) {
    const TrainArgs t = with_knobs(h.a, axes);
    h.comm->set_gradient_segment(parse_bytes(t.segment));
    h.trainer.replan(size_t(t.first_bucket_mb * kMiB), size_t(t.fusion_mb * kMiB), h.reducers(t));
  };
  tj.bucket_bytes = [&] {
    std::vector<double> out;
    for (const auto& b : h.trainer.plan().buckets) out.push_back(double(b.count) * sizeof(float));
    return out;
  };
  tj.step = [&] {
    const models::StepRecord r = h.trainer.step(h.source);
    if (!std::isfinite(r.loss))
      throw Error("the loss became " + std::to_string(r.loss) + " during --autotune's step " +
                  std::to_string(r.step) + ": lower --lr");
    return r;
  };
  tj.allreduce = [&](size_t bytes) { return probe.run(bytes); };
  tj.cpus = {host_info()["host"].get<std::string>(), migrate::affinity(), h.threads};
  tj.comm_threads_per_rank = tune::comm_threads_per_rank(h.a.transport);
  tj.share = [&](const std::string& key, const json& mine) { return share(job, key, mine); };
  tj.say = [&](const std::string& line) {
    if (job.rank == 0) std::printf("%s\n", line.c_str()), std::fflush(stdout);
  };
  tune::AutotuneOptions o{h.a.autotune_top_k, h.a.autotune_repeats, h.a.autotune_steps, h.a.autotune_log};
  const tune::AutotuneResult r = tune::autotune(tj, o, tune::issue_grid(), start_axes(h.a));
  // Each rank decided from the same shared figures; each checks that every rank chose the same.
  const std::vector<json> chosen = share(job, "chosen", tune::setting_text(r.chosen));
  for (size_t k = 0; k < chosen.size(); ++k)
    if (chosen[k] != chosen[size_t(job.rank)])
      throw Error("--autotune: rank " + std::to_string(k) + " chose " + chosen[k].dump() + ", rank " +
                  std::to_string(job.rank) + " " + chosen[size_t(job.rank)].dump());
  record = r.to_json();
  record["chosen_by_rank"] = chosen;
  record["space"] = tune::kIssueGrid;
  record["log"] = h.a.autotune_log.empty() ? json(nullptr) : json(h.a.autotune_log);
  if (job.rank == 0) say_chosen(r);
  return with_knobs(h.a, r.chosen);
}

}  // namespace ringbench
