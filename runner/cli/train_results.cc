// Rank 0's results of a training run: every rank's measured steps and test-set result, gathered
// through the store and checked, and the summary printed Horovod-style.
#include "runner/cli/train_results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "base/device_memory.h"
#include "base/errors.h"
#include "runner/job/world.h"
#include "runner/analysis/stats.h"

namespace ringbench {

using json = nlohmann::json;

namespace {

namespace m = ringbench::models;
using Clock = std::chrono::steady_clock;

json to_json(const MeanCi& m) { return {{"mean", m.mean}, {"ci95", m.ci95}}; }

// The per-step series of a rank's record: one number per step, and one array per step.
constexpr const char* kSeries[] = {"step_s", "compute_s", "forward_s", "backward_s", "allreduce_s", "exposed_s",
                                   "optimizer_s", "device_s", "device_wait_s", "cpu_s", "loss", "img_s"};
constexpr const char* kBucketSeries[] = {"bucket_ready_s", "bucket_allreduce_s"};

// Per-rank figures of the measured steps, sent to rank 0 through the store.
json rank_record(int rank, const std::vector<m::StepRecord>& steps, double cpus_busy, int batch) {
  json r = {{"rank", rank}, {"cpus_busy", cpus_busy}};
  for (const char* k : kSeries) r[k] = json::array();
  for (const char* k : kBucketSeries) r[k] = json::array();
  for (const auto& s : steps) {
    for (auto [k, v] : {std::pair{"step_s", s.step_s}, {"compute_s", s.compute_s}, {"forward_s", s.forward_s},
                        {"backward_s", s.backward_s}, {"allreduce_s", s.allreduce_s}, {"exposed_s", s.exposed_s},
                        {"optimizer_s", s.optimizer_s}, {"device_s", s.device_s},
                        {"device_wait_s", s.device_wait_s}, {"cpu_s", s.cpu_s}, {"loss", s.loss},
                        {"img_s", batch / s.step_s}})
      r[k].push_back(v);
    r["bucket_ready_s"].push_back(s.bucket_ready_s);
    r["bucket_allreduce_s"].push_back(s.bucket_allreduce_s);
  }
  return r;
}

constexpr int kMaxCpus = 1 << 16;  // more than any one machine has

// A time as rank 0 reads it from the store: a finite number >= 0.
bool is_time(const json& v) { return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0; }

// Rank `sender`'s measured steps as rank 0 read them from the store: every series must hold
// `steps` finite numbers (the losses may be any finite value, the times must be >= 0), and every
// per-bucket series `steps` arrays of as many times as rank 0's own (`buckets`).
void check_rank_record(const json& r, const std::string& key, int sender, size_t steps, const json& buckets) {
  const std::string from = "store key " + key + " (from rank " + std::to_string(sender) + "): ";
  if (!r.contains("rank") || r["rank"] != sender) throw Error(from + "it is not rank " + std::to_string(sender) + "'s record");
  if (!r.contains("cpus_busy") || !is_time(r["cpus_busy"]) || r["cpus_busy"].get<double>() > kMaxCpus)
    throw Error(from + "\"cpus_busy\" must be a number of CPUs from 0 to " + std::to_string(kMaxCpus));
  for (const char* k : kSeries) {
    if (!r.contains(k) || !r[k].is_array() || r[k].size() != steps)
      throw Error(from + "\"" + k + "\" must be an array of " + std::to_string(steps) + " numbers");
    for (const auto& v : r[k])
      if (std::string(k) == "loss" ? !v.is_number() || !std::isfinite(v.get<double>()) : !is_time(v))
        throw Error(from + "\"" + k + "\" holds " + v.dump() + ", not a measurement");
  }
  for (const char* k : kBucketSeries) {
    const size_t per_step = buckets[k].size();
    if (!r.contains(k) || !r[k].is_array() || r[k].size() != steps)
      throw Error(from + "\"" + k + "\" must be an array of " + std::to_string(steps) + " arrays");
    for (const auto& a : r[k])
      if (!a.is_array() || a.size() != per_step || !std::all_of(a.begin(), a.end(), is_time))
        throw Error(from + "\"" + k + "\" holds " + a.dump() + ", not " + std::to_string(per_step) +
                    " times (one per gradient bucket)");
  }
}

// For a per-step series: its mean over steps of the mean over ranks, and of the max over ranks.
json across_ranks(const std::vector<json>& ranks, const char* key) {
  const size_t steps = ranks[0][key].size();
  double mean_sum = 0, max_sum = 0;
  for (size_t i = 0; i < steps; ++i) {
    double sum = 0, mx = 0;
    for (const auto& r : ranks) {
      const double v = r[key][i].get<double>();
      sum += v;
      mx = std::max(mx, v);
    }
    mean_sum += sum / double(ranks.size());
    max_sum += mx;
  }
  const double n = double(std::max<size_t>(steps, 1));
  return {{"mean_over_ranks", mean_sum / n}, {"max_over_ranks", max_sum / n}};
}

// img/s of every step of a rank.
std::vector<double> img_s_of(const json& rank) {
  std::vector<double> img;
  for (const auto& v : rank["img_s"]) img.push_back(v.get<double>());
  return img;
}

}  // namespace

// Every rank's test-set result, summed over the ranks (every rank calls it: each publishes its own).
json gather_eval(m::Trainer& trainer, const m::Dataset& test_set, Store& store, int rank, int n, Millis timeout) {
  m::Trainer::Eval e = trainer.evaluate(test_set);
  store.set("train/eval/" + std::to_string(rank), json{e.correct, e.total, e.loss_sum}.dump());
  int64_t correct = 0, total = 0;
  double loss = 0;
  for (int r = 0; r < n; ++r) {
    const std::string key = "train/eval/" + std::to_string(r);
    json v = get_rank_json(store, key, r, timeout, json::value_t::array);
    if (v.size() != 3 || !v[0].is_number_integer() || !v[1].is_number_integer() || !v[2].is_number() ||
        v[0].get<int64_t>() < 0 || v[1].get<int64_t>() < v[0].get<int64_t>() || !std::isfinite(v[2].get<double>()))
      throw Error("store key " + key + " (from rank " + std::to_string(r) + "): " + v.dump() +
                  " is not [correct, total, loss sum]");
    correct += v[0].get<int64_t>();
    total += v[1].get<int64_t>();
    loss += v[2].get<double>();
  }
  return {{"test_accuracy", double(correct) / double(total)}, {"test_loss", loss / double(total)},
          {"correct", correct}, {"samples", total}};
}

// Every rank's measured steps, checked, as rank 0 reads them (every rank publishes its own).
std::vector<json> gather_steps(Store& store, int rank, int n, const std::vector<m::StepRecord>& measured,
                               double cpus_busy, int batch, Millis timeout) {
  const json own = rank_record(rank, measured, cpus_busy, batch);
  store.set("train/steps/" + std::to_string(rank), own.dump());
  json buckets = json::object();  // rank 0's own per-bucket arrays: how long each must be
  for (const char* k : kBucketSeries) buckets[k] = own[k].empty() ? json::array() : own[k][0];
  std::vector<json> ranks;
  for (int r = 0; r < n; ++r) {
    const std::string key = "train/steps/" + std::to_string(r);
    ranks.push_back(get_rank_json(store, key, r, timeout));
    check_rank_record(ranks.back(), key, r, measured.size(), buckets);
  }
  return ranks;
}

json per_rank_img_s(const std::vector<json>& ranks) {
  json per_rank = json::array();
  for (const auto& r : ranks) per_rank.push_back({{"rank", r["rank"]}, {"img_s", to_json(mean_ci(img_s_of(r)))}});
  return per_rank;
}

// The run's summary (rank 0): Horovod's img/sec per rank and in total, where a step's time goes,
// device memory, and the time-sliced device's share over the measured `window`.
json summarize(const std::vector<json>& ranks, const std::vector<m::StepRecord>& measured, const VgpuSetup& vgpu,
               int64_t tail_steps, std::pair<Clock::time_point, Clock::time_point> window) {
  std::vector<double> per_rank_means, totals(measured.size(), 0.0);
  for (const auto& r : ranks) {
    const std::vector<double> img = img_s_of(r);
    for (size_t i = 0; i < img.size() && i < totals.size(); ++i) totals[i] += img[i];
    per_rank_means.insert(per_rank_means.end(), img.begin(), img.end());
  }
  json summary = {{"img_s_per_rank", to_json(mean_ci(per_rank_means))}, {"total_img_s", to_json(mean_ci(totals))},
                  {"final_loss", measured.empty() ? 0.0 : measured.back().loss}};
  for (const char* k :
       {"step_s", "compute_s", "forward_s", "backward_s", "allreduce_s", "exposed_s", "optimizer_s", "cpu_s"})
    summary[k] = across_ranks(ranks, k);
  // CPUs each rank kept busy: the mean over ranks, and the least and most of one rank.
  double cpus = 0, least = 0, most = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const double c = ranks[i]["cpus_busy"].get<double>();
    cpus += c / double(ranks.size());
    least = i ? std::min(least, c) : c;
    most = std::max(most, c);
  }
  summary["cpus_busy_per_rank"] = cpus;
  summary["cpus_busy_min_max"] = {least, most};
  const double ar = summary["allreduce_s"]["mean_over_ranks"], ex = summary["exposed_s"]["mean_over_ranks"];
  summary["hidden_fraction"] = ar > 0 ? json(std::clamp(1.0 - ex / ar, 0.0, 1.0)) : json(nullptr);
  auto& mem = DeviceMemory::instance();
  summary["device_memory"] = {{"peak_mib", double(mem.peak()) / (1 << 20)},
                              {"cap_mib", vgpu.framebuffer_mib ? json(vgpu.framebuffer_mib) : json(nullptr)}};
  if (vgpu.gate) {
    // Rank 0's share of the time-sliced device over its measured steps (a sharing job is one
    // rank); the window is CLOCK_MONOTONIC, comparable with the scheduler's intervals.
    double held = 0, waited = 0, wall = 0;
    for (const auto& r : measured) held += r.device_s, waited += r.device_wait_s, wall += r.step_s;
    const double ns = double(measured.size() ? measured.size() : 1);
    auto since_epoch = [](Clock::time_point t) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    };
    summary["device"] = {{"held_s_per_step", held / ns}, {"wait_s_per_step", waited / ns},
                         {"utilization", wall > 0 ? held / wall : 0.0}, {"tail_steps", tail_steps},
                         {"window_ns", {since_epoch(window.first), since_epoch(window.second)}}};
  }
  return summary;
}

json step_timeline(const std::vector<json>& ranks, const json& bucket_list) {
  const size_t steps = ranks[0]["step_s"].size(), buckets = bucket_list.size();
  std::vector<double> ready(buckets, 0.0), reduce(buckets, 0.0);
  const bool reduced = ranks.size() > 1;
  for (size_t i = 0; i < steps; ++i)
    for (size_t b = 0; b < buckets; ++b) {
      double latest = 0;  // the ring cannot start a bucket before its last rank has it
      for (const auto& r : ranks) {
        const json &rd = r["bucket_ready_s"][i], &ar = r["bucket_allreduce_s"][i];
        if (rd.size() != buckets || (reduced && ar.size() != buckets))
          throw Error("rank " + r["rank"].dump() + "'s step " + std::to_string(i) + " has per-bucket times for " +
                      std::to_string(rd.size()) + " gradient buckets, not " + std::to_string(buckets));
        latest = std::max(latest, r["forward_s"][i].get<double>() + rd[b].get<double>());
        if (reduced) reduce[b] += ar[b].get<double>() / double(ranks.size() * steps);
      }
      ready[b] += latest / double(steps);
    }
  json bytes = json::array();
  for (const auto& b : bucket_list) bytes.push_back(b.value("bytes", 0));
  return {{"bucket_bytes", bytes}, {"bucket_ready_s", ready},
          {"bucket_allreduce_s", reduced ? json(reduce) : json::array()}};
}

// The Horovod-style result lines and where a step's time goes.
void print_summary(const json& summary, size_t steps, int n, const VgpuSetup& vgpu) {
  const json& per = summary["img_s_per_rank"];
  const json& total = summary["total_img_s"];
  std::printf("Img/sec per rank: %.1f +-%.1f (95%% CI over %zu steps x %d ranks)\n", per["mean"].get<double>(),
              per["ci95"].get<double>(), steps, n);
  std::printf("Total img/sec on %d rank(s): %.1f +-%.1f\n", n, total["mean"].get<double>(), total["ci95"].get<double>());
  std::printf("# per step (s):        mean over ranks   max over ranks\n");
  for (const char* k : {"step_s", "compute_s", "allreduce_s", "exposed_s", "optimizer_s"})
    std::printf("#   %-18s %12.4f %16.4f\n", k, summary[k]["mean_over_ranks"].get<double>(),
                summary[k]["max_over_ranks"].get<double>());
  if (!summary["hidden_fraction"].is_null())
    std::printf("#   allreduce hidden behind backward: %.0f%%\n", 100 * summary["hidden_fraction"].get<double>());
  const json& spread = summary["cpus_busy_min_max"];
  std::printf("# CPUs busy per rank (process CPU time / wall time over the measured steps): %.2f",
              summary["cpus_busy_per_rank"].get<double>());
  if (n > 1) std::printf(" mean over ranks, min %.2f, max %.2f", spread[0].get<double>(), spread[1].get<double>());
  std::printf("\n");
  if (vgpu.gate)
    std::printf("# device (time-sliced, %s): held %.4f s and waited %.4f s per step, utilization %.1f%%\n",
                vgpu.profile.c_str(), summary["device"]["held_s_per_step"].get<double>(),
                summary["device"]["wait_s_per_step"].get<double>(), 100 * summary["device"]["utilization"].get<double>());
  std::printf("# device memory: peak %.1f MiB%s\n", summary["device_memory"]["peak_mib"].get<double>(),
              vgpu.framebuffer_mib ? (" of the " + std::to_string(vgpu.framebuffer_mib) + " MiB framebuffer of " +
                                      vgpu.profile).c_str() : "");
}

// The `# migration` line (rank 0).
void print_migration(const json& mj) {
  if (mj.is_null()) return;
  const double mib = 1 << 20;
  if (!mj.value("moved", false)) {
    std::printf("# migration of rank %d FAILED, resumed on its node: %s\n", mj.value("rank", -1),
                mj.value("error", std::string("?")).c_str());
  } else {
    std::printf("# migration of rank %d (%s) to %s: framebuffer %.0f MiB, %d pre-copy round(s) %.1f MiB in %.2f s; "
                "stun %.3f s (%.1f MiB copied stunned); total %.2f s; the ring stalled %.3f s\n",
                mj["rank"].get<int>(), mj["method"].get<std::string>().c_str(), mj["to"].get<std::string>().c_str(),
                mj["framebuffer_bytes"].get<double>() / mib, mj["precopy_rounds"].get<int>(),
                mj["precopy_bytes"].get<double>() / mib, mj["precopy_s"].get<double>(), mj["stun_s"].get<double>(),
                mj["stun_bytes"].get<double>() / mib, mj["total_s"].get<double>(), mj["ring_stall_s"].get<double>());
    std::string cpus;
    for (const json& c : mj.value("target_cpus", json::array())) cpus += (cpus.empty() ? "" : ",") + c.dump();
    if (!cpus.empty()) std::printf("# the moved rank now runs on CPUs %s\n", cpus.c_str());
    if (mj.value("forced_at_last_step", false))
      std::printf("# the stun was forced by the run's last step: the target was not ready, or pre-copy had not "
                  "converged (use more --steps)\n");
    if (const int64_t n = mj.value("refused_connections", int64_t(0)); n > 0)
      std::printf("# the target refused %lld unauthenticated connection%s%s\n", static_cast<long long>(n),
                  n == 1 ? "" : "s",
                  mj.value("refused_during_stun", false) ? ", some while the rank was stunned: the stun includes them"
                                                         : " (none while the rank was stunned)");
  }
  std::fflush(stdout);
}

}  // namespace ringbench
