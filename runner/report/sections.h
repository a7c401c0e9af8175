// summary.csv and the sections of report.md, one function each, in the order write_report puts
// them (one file each: summary_csv.cc, md_header.cc, md_train.cc, md_vgpu.cc, md_infer.cc,
// md_collectives.cc).
#pragma once

#include <string>

#include "runner/analysis/plots.h"
#include "runner/report/report.h"
#include "runner/analysis/run.h"

namespace ringbench::report {

// One row per point (the columns are in report.h).
std::string summary_csv(const Run& run);

// The title, wrong-results warnings, cluster, dates, point counts and the plots' note.
std::string md_header(const Run& run, const Plotter& plotter);

std::string md_definitions(const ReportOptions& opts, const Run& run);

// One section per model: a table per (batch, image size), its ratio tables and the plots.
std::string md_train(const Run& run, Plotter& plotter);

// Where the time of a training step goes.
std::string md_time(const Run& run, Plotter& plotter);

std::string md_stragglers(const Run& run, const ReportOptions& opts);

// vGPU profiles: how each ran here, whether the models fit, and k VMs sharing one device.
std::string md_vgpu(const Run& run, Plotter& plotter);

// Inference (`ringbench infer` points): per model Offline samples/s against batch, SingleStream
// percentiles, the Server peak QPS at the bound, each with LoadGen's validity; MobileNet v1
// against Inception v3 (md_infer.cc).
std::string md_infer(const Run& run, Plotter& plotter);

// Its vGPU part (md_infer_vgpu.cc), where infer points ran under profiles or shared a device: the
// QPS at the p99 bound per profile and policy, per VM and in total; "" for other runs.
std::string md_infer_vgpu(const Run& run, Plotter& plotter);

// Live migration (migrate points, md_migrate.cc): stun time per method and framebuffer, the job's
// img/s around the stun, the stun model with its predictions, the stun plot; "" for other runs.
std::string md_migrate(const Run& run, Plotter& plotter);

// Remote GPU (remote points, md_remote.cc): VMware's setups normalised to the local device, the
// traffic per step, predict's remote model and a plot of the kept share against the link rate;
// "" for other runs.
std::string md_remote(const Run& run, Plotter& plotter);

std::string md_collectives(const Run& run, Plotter& plotter);

// A sweep's `tuned: true` (md_tuning.cc): per tuned point and repeat the chosen setting, predicted
// against measured img/s, and the gain over the defaults; "" for a run without tuned points.
std::string md_tuning(const Run& run);

// Rank 0's transport path of each point.
std::string md_paths(const Run& run);

std::string md_failures(const Run& run);

}  // namespace ringbench::report
