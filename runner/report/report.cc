// `ringbench report RUN_DIR`: summary.csv, report.md and the gnuplot SVGs from raw.jsonl alone.
// The pieces, one file each: under runner/analysis/, records (raw.jsonl), run (points and
// statistics), format and plots; here summary_csv, md_header, md_train, md_vgpu, md_collectives;
// predict/'s model check and predictions; `ringbench compare` is compare.cc.
#include "runner/report/report.h"

#include "base/output_file.h"
#include "runner/predict/md_model_check.h"
#include "runner/predict/md_predictions.h"
#include "runner/analysis/plots.h"
#include "runner/analysis/run.h"
#include "runner/report/sections.h"

// write_report is ringbench's (report.h); what it uses is the report's.
namespace ringbench {

using namespace report;

void write_report(const std::string& run_dir, const ReportOptions& opts) {
  for (const char* own : {"summary.csv", "report.md", "plots"}) refuse_symlink(run_dir + "/" + own);
  const Run run = load_run(run_dir, opts.straggler_margin);
  const predict::ModelCheck check = predict::check_model(run);  // fitted once, for both of its sections
  Plotter plotter(run_dir, opts.plots);
  const std::string md = md_header(run, plotter) + md_definitions(opts, run) +
                         md_train(run, plotter) + md_tuning(run) + md_time(run, plotter) + md_stragglers(run, opts) +
                         md_vgpu(run, plotter) + md_infer(run, plotter) + md_migrate(run, plotter) + md_remote(run, plotter) +
                         md_collectives(run, plotter) +
                         predict::md_model_check(check) + predict::md_predictions(run, check.fits, plotter) + md_paths(run) +
                         md_failures(run);
  write_file_atomic(run_dir + "/summary.csv", summary_csv(run));
  write_file_atomic(run_dir + "/report.md", md);
}

}  // namespace ringbench
