// report.md's header (title, wrong results, cluster, dates, point counts) and definitions.
#include "runner/report/sections.h"

#include <cstdio>
#include <map>

#include "runner/analysis/format.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

std::string cluster_line(const json& c) {
  std::string s = "Cluster: " + str_or(c, "type", "?");
  s += c.contains("link") && c["link"].is_string() ? ", " + c["link"].get<std::string>() + " links"
                                                   : ", links not rate-limited";
  if (c.contains("cpus_per_node") && c["cpus_per_node"].is_number_integer()) {
    const int cpus = c["cpus_per_node"].get<int>();
    s += ", " + std::to_string(cpus) + (cpus == 1 ? " CPU" : " CPUs") + " per node";
  }
  if (c.contains("ranks_per_node") && c["ranks_per_node"].is_number_integer())
    s += ", " + std::to_string(c["ranks_per_node"].get<int>()) + " ranks per node (a point on N nodes runs N x that)";
  const std::string note = str_or(c, "note", "");
  return s + (note.empty() ? "" : " (" + note + ")") + ".\n";
}

// Definitions of what only runs with vGPU profiles or share points report.
std::string vgpu_definitions(const Run& run) {
  if (!has_vgpu(run)) return "";
  std::string md =
      "- **does not fit**: the model and batch need more device memory than the profile's "
      "framebuffer (emulated: the framebuffer is a hard cap on the backend's memory, as a real "
      "vGPU runs out of memory). A result, not a failure.\n";
  if (!has_share(run)) return md;
  return md +
         "- **device utilization** (per VM): the time a VM held the device / its wall time, over "
         "its measured steps; mean over VMs and repeats. **device total**: the fraction of the "
         "common window (the time in which every VM was measuring) during which any VM held the "
         "device; mean over repeats.\n"
         "- **per-VM img/s, k vs 1** = img/s per VM with k VMs on the device / img/s of one VM "
         "alone, same profile, policy, model, batch and image size; paired by repeat, median ± "
         "CI.\n";
}

}  // namespace

std::string md_header(const Run& run, const Plotter& plotter) {
  std::string md = "# ringbench sweep `" + run.sweep + "`, run `" + run.run_id + "`\n\n";
  for (const auto& p : run.points)
    for (const auto& w : p.wrong)
      md += "> **FAILED: wrong results.** " + p.id + " repeat " + std::to_string(w.repeat) + ": " +
            std::to_string(w.wrong) + " wrong elements at " + fmt_bytes(w.bytes) +
            (w.inplace ? " (in-place)" : " (out-of-place)") +
            ". The allreduce computed a wrong sum: no number of this run can be trusted.\n\n";
  md += cluster_line(run.cluster);
  if (!run.started.empty())
    md += "Points started from " + run.started.front() + " to " + run.started.back() + ".\n";
  std::map<std::string, int> points, repeats;
  for (const auto& p : run.points) {
    ++points[p.status()];
    for (const auto& r : p.repeats) ++repeats[r.status];
  }
  // "does not fit" only where a point or repeat did not fit: a run without reads as before.
  const bool misfit = repeats.count("does_not_fit") > 0;
  const auto counts = [misfit](std::map<std::string, int>& m) {
    return std::to_string(m["ok"]) + " ok, " +
           (misfit ? std::to_string(m["does_not_fit"]) + " does not fit, " : "") +
           std::to_string(m["failed"]) + " failed, " + std::to_string(m["skipped"]) + " skipped";
  };
  md += "Points: " + counts(points) + " (repeats: " + counts(repeats) + ").\n\n";
  if (!plotter.enabled()) md += plotter.note() + "\n\n";
  return md;
}

std::string md_definitions(const ReportOptions& opts, const Run& run) {
  char margin[32];
  std::snprintf(margin, sizeof margin, "%g%%", 100 * opts.straggler_margin);
  return std::string("## Definitions\n\n") +
         "- **total img/s**: images per second summed over the ranks, averaged over a run's "
         "measured steps. Tables give the median over repeats ± the CI.\n"
         "- **scaling efficiency(N)** = (total img/s at N / N) / (img/s at N=1), same model, batch, "
         "image size and profile. Computed per repeat (repeat r at N over repeat r at N=1, or over "
         "the N=1 median when that repeat is missing), then mean ± CI; 1.0 is linear scaling.\n"
         "- **X vs tcp** = total img/s with transport X / total img/s with tcp at the same N, "
         "paired by repeat, mean ± CI.\n"
         "- **CI**: 95% Student-t confidence interval of the mean over repeats (none with one "
         "repeat).\n"
         "- **step, compute, exposed comm, optimizer**: seconds per step, mean over ranks and "
         "repeats. Exposed comm is the allreduce time not hidden behind backward; hidden % = 1 - "
         "exposed / allreduce.\n"
         "- **straggler**: a rank whose median step time exceeds the median of all ranks' median "
         "step times by more than " + margin + " (the straggler margin).\n"
         "- **busbw** = algbw × 2(N-1)/N (as nccl-tests), GB = 10^9 bytes; time is the slowest "
         "rank's mean.\n" +
         vgpu_definitions(run) + "\n";
}

}  // namespace ringbench::report
