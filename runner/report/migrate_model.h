// What the report's "Live migration" section is made of (md_migrate.cc): each migrate point's
// repeats as its records give them (stun, copied bytes, the job's img/s around the stun), and the
// model of stun time against the framebuffer F over a link of rate R:
//   stop-and-copy: stun = t0 + F / R        (t0, R: least squares over the stop-and-copy runs)
//   pre-copy:      stun = t0 + W / R        (W: what the job rewrote since the last round, its
//                                            working set, whatever F; t0 and R as above)
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/analysis/run.h"

namespace ringbench::report {

constexpr double kGiB = 1024.0 * 1024 * 1024, kMiB = 1024.0 * 1024;
constexpr double kStunTargetS = 1.0;  // vMotion's stun-time standard
// The framebuffers the model predicts: the vGPU profiles larger than this machine can hold.
inline const std::vector<double> kPredictedFramebuffers{16 * kGiB, 24 * kGiB};

// The job's img/s around the stun, from rank 0's per-step times (the stall is part of a step).
struct StunStep {
  int steps_before = 0;    // measured steps trained from the migration's start to the stalled one
  int step = 0;            // the stalled step, 1-based, warmup included
  double img_s = 0;        // nodes × batch / its step time
  double others_img_s = 0; // the median over the other measured steps
};

// One repeat of a migrate point that ran (status ok).
struct MigrationRun {
  int repeat = 0;
  bool recorded = false, moved = false;  // recorded: the record has a migration object
  bool forced = false;                   // the run's last step forced the stun (not ready, not converged)
  std::string error;                     // why the rank did not move
  double framebuffer_bytes = 0, stun_s = 0, stun_bytes = 0, precopy_rounds = 0, precopy_bytes = 0, total_s = 0,
         ring_stall_s = 0;
  std::optional<StunStep> dip;
};

// A migrate point: one method at one framebuffer (or profile), its runs by repeat.
struct MigrationRow {
  const Point* point = nullptr;
  double framebuffer_bytes = 0;  // from the runs, else the configured size (0: not known)
  std::vector<MigrationRun> runs;
  std::vector<const MigrationRun*> moved() const;
  std::vector<const MigrationRun*> modelled() const;  // moved, the stun not forced: the model's and plot's
};

// One run from its record (`r` of a migrate point `p`).
MigrationRun migration_run(const Point& p, const Record& r);
// The rows of migrate points, by method (pre-copy first), framebuffer and profile.
std::vector<MigrationRow> migration_rows(const std::vector<const Point*>& pts);

// stun = t0 + s × bytes, least squares over (bytes, stun s).
struct StunFit {
  double t0_s = 0, s_per_byte = 0, r2 = 0;
  size_t runs = 0, sizes = 0;
  double at(double bytes) const { return t0_s + s_per_byte * bytes; }
  double rate_bytes_s() const { return 1 / s_per_byte; }
};
// Needs two framebuffer sizes or more; nullopt otherwise.
std::optional<StunFit> fit_stun(const std::vector<std::pair<double, double>>& bytes_stun);

struct MigrationModel {
  std::optional<StunFit> stopcopy;        // over every modelled stop-and-copy run
  std::vector<double> precopy_stun_bytes;  // W: each modelled pre-copy run's
  std::vector<double> precopy_stun_s;
  // Pre-copy's stun by the model (t0 + median W / R), where stop-and-copy gives t0 and R.
  std::optional<double> precopy_model_s() const;
  // What the model predicts for framebuffer F: stop-and-copy's line, or pre-copy's stun (by the
  // model, else the median measured: the same working set whatever F).
  std::optional<double> predict(const std::string& method, double framebuffer_bytes) const;
  // Pre-copy's stun were the copy to reach the links' line rate (bits/s): t0 + median W / line.
  std::optional<double> precopy_at_line_rate_s(double line_bits_s) const;
};
MigrationModel migration_model(const std::vector<MigrationRow>& rows);

// A tc rate ("10gbit", "100mbit", "2.5gbit"; k, m, g are powers of 1000) in bits/s, or nullopt.
std::optional<double> tc_rate_bits(const std::string& rate);

// "1 GiB", "64 MiB", "1.5 GiB".
std::string fb_size_text(double bytes);
// "pre-copy", "stop-and-copy".
std::string method_text(const std::string& method);

}  // namespace ringbench::report
