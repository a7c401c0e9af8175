// report.md's collectives, transport paths and failed points.
#include "runner/report/sections.h"

#include <map>
#include <set>

#include "runner/analysis/format.h"
#include "runner/backends/collective.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

std::vector<std::string> size_row(uint64_t bytes, const SizeStats& s) {
  std::string algos;
  for (const auto& a : s.algos) algos += (algos.empty() ? "" : "/") + a;
  return {fmt_bytes(bytes), algos, s.time_us.empty() ? "-" : fixed(median(s.time_us), 1),
          s.busbw.empty() ? "-" : fixed(median(s.busbw), 3),
          s.checked ? std::to_string(s.wrong) : "not checked"};
}

// "transport=tcp addr=10.77.0.1:41234 iface=eth0 link_gbps=1": the transport first.
std::string path_text(const json& path) {
  if (!path.is_object()) return path.dump();
  const auto value = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  std::string s = path.contains("transport") ? "transport=" + value(path["transport"]) : "";
  for (const auto& [k, v] : path.items())
    if (k != "transport") s += (s.empty() ? "" : " ") + k + "=" + value(v);
  return s;
}

// " busbw = algbw × 0.500 at N=2, 0.750 at N=4 (nccl-tests' factor for <op>)." (allreduce's is in
// the definitions): the descriptor's factor at each rank count of the points.
std::string busbw_text(const std::vector<const Point*>& points, const std::string& op, const Run& run) {
  const Collective& c = find_collective(op);
  std::set<int> ranks;
  for (const Point* p : points) ranks.insert(ranks_of(run, *p));
  std::string at;
  for (int n : ranks) at += (at.empty() ? "" : ", ") + fixed(c.busbw_factor(n), 3) + " at N=" + std::to_string(n);
  return " busbw = algbw × " + at + " (nccl-tests' factor for " + op + ").";
}

// One collective's section: a table per point and a busbw plot (allreduce's plots/busbw.svg,
// the others' plots/busbw-<op>.svg).
std::string md_collective(const std::vector<const Point*>& points, const std::string& op, const Run& run,
                          Plotter& plotter) {
  std::string md = "## Collectives (" + op + ")\n\nOut-of-place rows, median over the ok repeats; "
                   "#wrong summed over them (any wrong element fails the run: see the top)." +
                   (op == "allreduce" ? "" : busbw_text(points, op, run)) + "\n\n";
  for (const Point* p : points) {
    md += "### N=" + std::to_string(p->nodes) + ", " + p->transport +
          (p->profile != "none" ? ", " + p->profile : "") + " (" + p->id + ")\n\n";
    if (p->sizes.empty()) {
      md += "No results: the point " + p->status() + ".\n\n";
      continue;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& [bytes, s] : p->sizes) rows.push_back(size_row(bytes, s));
    md += md_table({"size", "algo", "time us", "busbw GB/s", "#wrong"}, "rlrrr", rows);
  }
  const std::string plot = op == "allreduce" ? "busbw" : "busbw-" + op;
  if (plotter.enabled() && busbw_plot(run, plotter, op, plot)) md += image(op + " busbw vs message size", plot);
  return md;
}

}  // namespace

// A section per collective the run measured, in the order its points come (allreduce's first
// where it has any: runs from before the `ops` axis read as they did).
std::string md_collectives(const Run& run, Plotter& plotter) {
  std::vector<std::string> ops;
  std::map<std::string, std::vector<const Point*>> by_op;
  for (const Point* p : points_of(run, PointKind::collectives)) {
    const std::string& op = p->axis("collective");
    if (by_op[op].empty()) ops.push_back(op);
    by_op[op].push_back(p);
  }
  std::string md;
  for (const auto& op : ops) md += md_collective(by_op[op], op, run, plotter);
  return md;
}

std::string md_paths(const Run& run) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : run.points) {
    if (p.kind == PointKind::infer) {  // one local process serving itself
      rows.push_back({p.id, "n/a", "n/a (one process, no transport)"});
      continue;
    }
    if (p.kind == PointKind::remote) {  // a device link, not a ring: the Remote GPU section says which
      rows.push_back({p.id, "n/a", p.setup == "local_device" ? "n/a (the device itself, no server)"
                                                             : "device link over " + p.transport +
                                                                   (p.setup == "link" ? " between nodes" : " on loopback")});
      continue;
    }
    if (p.kind == PointKind::share) {  // k single-rank jobs on one device: nothing crosses a network
      rows.push_back(
          {p.id, "n/a", "n/a (" + vms_text(p.vms) + " sharing one device, no transport)"});
      continue;
    }
    std::vector<std::string> row = {p.id, "-", p.status() == "does_not_fit"
                                                   ? "n/a (does not fit the profile's framebuffer)"
                                                   : "n/a (no repeat ran)"};
    for (const auto& r : p.repeats) {
      const json* s = section(r);
      const json* hosts = s ? find_at(*s, "/meta/hosts") : nullptr;
      if (!hosts || !hosts->is_array() || hosts->empty()) continue;
      const json& rank0 = (*hosts)[0];
      row = {p.id, host_of(r, 0), path_text(rank0.is_object() ? rank0.value("path", json()) : json())};
      break;
    }
    rows.push_back(row);
  }
  return "## Transport path actually used\n\nRank 0's path as the transport reported it "
         "(meta.hosts[0].path of the first repeat that ran).\n\n" +
         md_table({"point", "rank 0 host", "path"}, "lll", rows);
}

std::string md_failures(const Run& run) {
  std::string md = "## Failed and skipped points\n\n", misfits;
  size_t n = 0;
  for (const auto& p : run.points)
    for (const auto& r : p.repeats) {
      const std::string item = "- `" + p.id + "` repeat " + std::to_string(r.repeat) + ": ";
      const std::string error = r.error.empty() ? "(no error recorded)" : one_line(r.error);
      if (r.status == "does_not_fit") {
        misfits += item + error + "\n";
      } else if (r.status != "ok") {
        md += item + r.status + ": " + error + "\n";
        ++n;
      }
    }
  md += n ? "\n" : "None.\n";
  if (misfits.empty()) return md;
  return md + (n ? "" : "\n") +
         "Did not fit the profile's framebuffer (results, not failures: the model and batch need "
         "more device memory than the profile gives):\n\n" + misfits;
}

}  // namespace ringbench::report
