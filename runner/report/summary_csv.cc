// summary.csv: one row per point (the columns are in report.h).
#include "runner/report/sections.h"

#include <algorithm>

#include "runner/analysis/format.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

std::string fraction4(const std::optional<double>& v) { return v ? fixed(*v, 4) : ""; }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string csv_line(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i) line += ',';
    line += csv_field(cells[i]);
  }
  return line + "\n";
}

std::vector<std::string> train_cells(const Point& p) {
  if (p.total.empty()) return std::vector<std::string>(13, "");
  std::vector<double> totals;
  for (const auto& t : p.total) totals.push_back(t.second);
  const MeanCi t = mean_ci(totals);
  const auto ci = [](const std::optional<MeanCi>& m, int d) {
    return m && m->n >= 2 ? fixed(m->ci95, d) : "";
  };
  return {fixed(median(totals), 2),
          t.n >= 2 ? fixed(t.ci95, 2) : "",
          p.per_rank.empty() ? "" : fixed(median(p.per_rank), 2),
          p.efficiency ? fixed(p.efficiency->mean, 4) : "",
          ci(p.efficiency, 4),
          p.ratio_vs_tcp ? fixed(p.ratio_vs_tcp->mean, 4) : "",
          ci(p.ratio_vs_tcp, 4),
          fixed(p.step_s, 6),
          fixed(p.compute_s, 6),
          fixed(p.exposed_s, 6),
          fixed(p.allreduce_s, 6),
          fixed(p.hidden, 4),
          std::to_string(p.stragglers.size())};
}

// A share point in train's columns: total img/s (the VMs' sum), img/s per VM in the per-rank
// column, step s (mean over VMs); the rest does not apply.
std::vector<std::string> share_cells(const Point& p) {
  std::vector<std::string> cells(13, "");
  if (p.total.empty()) return cells;
  std::vector<double> totals, per_vm;
  for (const auto& t : p.total) totals.push_back(t.second);
  for (const auto& v : p.per_vm) per_vm.push_back(v.second);
  const MeanCi t = mean_ci(totals);
  cells[0] = fixed(median(totals), 2);
  cells[1] = t.n >= 2 ? fixed(t.ci95, 2) : "";
  cells[2] = per_vm.empty() ? "" : fixed(median(per_vm), 2);
  cells[7] = fixed(p.step_s, 6);
  return cells;
}

// Appended to summary.csv when the run has vGPU profiles or share points (see report.h).
std::vector<std::string> vgpu_columns() {
  return {"policy", "vms", "device_util_per_vm", "device_util_total", "device_memory_peak_mib",
          "framebuffer_mib", "vgpu_mode", "repeats_does_not_fit"};
}

std::vector<std::string> vgpu_cells(const Point& p) {
  if (p.kind == PointKind::collectives) return std::vector<std::string>(vgpu_columns().size(), "");
  const bool share = p.shared();
  const auto fb = framebuffer_of(p);
  const json* v = vgpu_of(p);
  return {p.policy,
          share ? std::to_string(p.vms) : "",
          fraction4(p.util_per_vm),
          fraction4(p.util_total),
          p.memory_peak_mib ? fixed(*p.memory_peak_mib, 1) : "",
          fb ? mib(*fb) : "",
          v ? str_or(*v, "mode", "") : "",
          std::to_string(p.count("does_not_fit"))};
}

// The size with the highest median busbw.
std::optional<std::pair<uint64_t, double>> peak_busbw(const Point& p) {
  std::optional<std::pair<uint64_t, double>> best;
  for (const auto& [bytes, s] : p.sizes)
    if (!s.busbw.empty() && (!best || median(s.busbw) > best->second))
      best = std::pair(bytes, median(s.busbw));
  return best;
}

// The axes summary.csv gives a column: each one some point sets off its default, the first two
// (precision, compression: the columns of the runs before the registry) together.
std::vector<size_t> axis_columns(const Run& run) {
  std::vector<size_t> columns;
  for (size_t i = 0; i < sweep_axes().size(); ++i) {
    const auto off_default = [&](size_t j) {
      return std::any_of(run.points.begin(), run.points.end(), [&](const Point& p) {
        return p.kind == sweep_axes()[j].kind && p.axes[j] != sweep_axes()[j].default_value;
      });
    };
    if (off_default(i) || (i < 2 && off_default(1 - i))) columns.push_back(i);
  }
  return columns;
}

}  // namespace

std::string summary_csv(const Run& run) {
  std::string csv = csv_line(
      {"kind", "point", "model", "batch", "image_size", "nodes", "transport", "profile",
       "repeats_ok", "repeats_failed", "total_img_s_median", "total_img_s_ci95",
       "img_s_per_rank_median", "efficiency_mean", "efficiency_ci95", "ratio_vs_tcp_mean",
       "ratio_vs_tcp_ci95", "step_s", "compute_s", "exposed_s", "allreduce_s", "hidden_fraction",
       "stragglers", "busbw_gbps_max", "busbw_at_bytes"});
  const bool vgpu = has_vgpu(run);
  if (vgpu) {
    csv.pop_back();
    csv += ',';  // appended: GCC 12's -Wrestrict misfires on "," + std::string
    csv += csv_line(vgpu_columns());
  }
  // A column per sweep axis some point sets off its default (older runs' stay as they were);
  // precision and compression, the first two, come together.
  const std::vector<size_t> columns = axis_columns(run);
  for (size_t i : columns) {
    csv.pop_back();
    csv += ',';
    csv += sweep_axes()[i].key + "\n";
  }
  for (const auto& p : run.points) {
    const bool train = p.kind == PointKind::train, model = p.has_model();
    std::vector<std::string> cells = {
        kind_name(p.kind), p.id, p.model, model ? std::to_string(p.batch) : "",
        model ? std::to_string(p.image_size) : "", std::to_string(p.nodes), p.transport, p.profile,
        std::to_string(p.count("ok")), std::to_string(p.count("failed"))};
    const auto more = train ? train_cells(p)
                      : model ? share_cells(p)  // infer: Offline samples/s at the largest batch
                              : std::vector<std::string>(13, "");
    cells.insert(cells.end(), more.begin(), more.end());
    const auto peak = model ? std::nullopt : peak_busbw(p);
    cells.push_back(peak ? fixed(peak->second, 3) : "");
    cells.push_back(peak ? std::to_string(peak->first) : "");
    if (vgpu) {
      const auto extra = vgpu_cells(p);
      cells.insert(cells.end(), extra.begin(), extra.end());
    }
    for (size_t i : columns) cells.push_back(sweep_axes()[i].kind == p.kind ? p.axes[i] : "");
    csv += csv_line(cells);
  }
  return csv;
}

}  // namespace ringbench::report
