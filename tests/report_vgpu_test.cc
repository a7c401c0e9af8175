// `ringbench report` on runs with vGPU profiles and k VMs sharing a device: the header's counts,
// the profile and memory tables, the sharing table and plots, summary.csv's vGPU columns, and a
// run without profiles keeping its report as before.
#include "tests/report_fixture.h"

namespace ringbench {
namespace {

using namespace report_testing;

// vGPU profiles: lenet on T4-4C fits (peak 412.5 of 4096 MiB), inception_v3 on P40-1Q does not; lenet
// shared by 1 and 4 VMs of T4-4C under best_effort and fixed_share, and of T4-16C (one vGPU per
// GPU: the 4 VMs points are skipped). Two repeats each, the second 1% faster.

const std::string kEmulated = "no NVIDIA GPU here: the profile is emulated";

json vgpu_meta(double framebuffer) {
  return {{"mode", "emulated"}, {"message", kEmulated}, {"framebuffer_mib", framebuffer},
          {"detected", "none"}};
}

void train_profile(Sweep& s, const std::string& profile, const std::vector<double>& totals,
                   double peak_mib, double cap_mib) {
  const std::string point = "train/lenet/b32/n1/none/" + profile;
  for (int rep = 1; rep <= int(totals.size()); ++rep) {
    const double total = totals[size_t(rep - 1)], step = 32.0 / total;
    const auto over_ranks = [](double v) {
      return json{{"mean_over_ranks", v}, {"max_over_ranks", v}};
    };
    json rec = s.common(point, rep, "train", 1, "none");
    rec.update({{"model", "lenet"}, {"batch", 32}, {"image_size", 0}, {"profile", profile}});
    rec["train"] = {
        {"summary",
         {{"total_img_s", {{"mean", total}, {"ci95", 1.0}}},
          {"img_s_per_rank", {{"mean", total}, {"ci95", 1.0}}}, {"step_s", over_ranks(step)},
          {"compute_s", over_ranks(0.95 * step)}, {"exposed_s", over_ranks(0)},
          {"allreduce_s", over_ranks(0)}, {"optimizer_s", over_ranks(0.05 * step)},
          {"hidden_fraction", nullptr},
          {"device_memory", {{"peak_mib", peak_mib + rep - 1}, {"cap_mib", cap_mib}}}}},
        {"ranks", json::array({{{"rank", 0}, {"step_s", {step, step}}}})},
        {"meta", {{"params", 61706}, {"backend", "dnnl"}, {"hosts", Sweep::hosts(1, "none")},
                  {"vgpu", vgpu_meta(cap_mib)}}}};
    s.records.push_back(rec);
  }
}

void train_does_not_fit(Sweep& s, int repeats) {
  const std::string message =
      "out of device memory: onednn tensor of 12.5 MiB with 1019.0 MiB of the 1024 MiB in use";
  for (int rep = 1; rep <= repeats; ++rep) {
    json rec = s.common("train/inception_v3/b64/n1/none/P40-1Q", rep, "train", 1, "none");
    rec.update({{"model", "inception_v3"}, {"batch", 64}, {"image_size", 0}, {"profile", "P40-1Q"},
                {"status", "does_not_fit"}, {"error", message}});
    rec["does_not_fit"] = {{"profile", "P40-1Q"}, {"framebuffer_mib", 1024.0},
                           {"requested_mib", 12.5}, {"in_use_mib", 1019.0},
                           {"needed_at_least_mib", 1031.5}, {"allocation", "onednn tensor"},
                           {"message", message}};
    rec["vgpu"] = vgpu_meta(1024);
    s.records.push_back(rec);
  }
}

// `per_vm` img/s per VM in repeat 1; utilization per VM and of the device (null: not measured).
void share(Sweep& s, const std::string& profile, int max_instances, const std::string& policy,
           int vms, int repeats, double per_vm, double util, json util_total) {
  const std::string point =
      "share/lenet/b32/" + profile + "/" + policy + "/vms" + std::to_string(vms);
  for (int rep = 1; rep <= repeats; ++rep) {
    json rec = s.common(point, rep, "share", 1, "none");
    rec.update({{"model", "lenet"}, {"batch", 32}, {"image_size", 0}, {"profile", profile},
                {"policy", policy}, {"vms", vms}, {"slice_ms", 2.0}});
    if (vms > max_instances) {
      rec.update({{"status", "skipped"},
                  {"error", profile + " hosts at most " + std::to_string(max_instances) +
                                " vGPU(s) per GPU"}});
      s.records.push_back(rec);
      continue;
    }
    const double img = per_vm * (1 + 0.01 * (rep - 1)), step = 32 / img;
    json per = json::array();
    for (int vm = 0; vm < vms; ++vm)
      per.push_back({{"vm", vm}, {"img_s", {{"mean", img}, {"ci95", 0.5}}}, {"step_s", step},
                     {"device_util", util}, {"device_held_s_per_step", util * step},
                     {"device_wait_s_per_step", (1 - util) * step},
                     {"device_memory_peak_mib", 400.0 + vm}});
    rec["share"] = {
        {"summary",
         {{"total_img_s", {{"mean", img * vms}, {"ci95", 1.0}}},
          {"img_s_per_vm", {{"mean", img}, {"min", img}, {"max", img}}}, {"step_s", step},
          {"device_util_per_vm", util}, {"device_util_total", util_total},
          {"common_window_s", 3.5}}},
        {"vms", per},
        {"meta", {{"backend", "dnnl"}, {"threads_per_rank", 1}, {"steps", 20}, {"warmup", 5},
                  {"gpu", "T4"}, {"framebuffer_mib", profile == "T4-4C" ? 4096 : 16384},
                  {"max_instances", max_instances}, {"slice_ms", 2.0},
                  {"vgpu", vgpu_meta(profile == "T4-4C" ? 4096 : 16384)}}}};
    s.records.push_back(rec);
  }
}

Sweep vgpu_sweep(double share_scale = 1) {
  Sweep s;
  s.train(1, "none", {100, 100});
  train_profile(s, "T4-4C", {98, 99}, 412.5, 4096);
  train_does_not_fit(s, 2);
  const std::vector<std::pair<std::string, int>> profiles = {{"T4-4C", 4}, {"T4-16C", 1}};
  for (const auto& [profile, max] : profiles) {
    const bool quarter = profile == "T4-4C";
    share(s, profile, max, "best_effort", 1, 2, 100 * share_scale, 0.95, 0.95);
    share(s, profile, max, "best_effort", 4, 2, 24 * share_scale, 0.24, 0.97);
    share(s, profile, max, "fixed_share", 1, 2, (quarter ? 25 : 100) * share_scale,
          quarter ? 0.25 : 0.95, quarter ? 0.25 : 0.95);
    share(s, profile, max, "fixed_share", 4, 2, 24 * share_scale, 0.24, nullptr);
  }
  return s;
}

const std::string kShare = "share/lenet/b32/T4-4C/";

TEST(ReportVgpu, HeaderCountsDoesNotFitApartFromFailures) {
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_NE(md.find("Points: 8 ok, 1 does not fit, 0 failed, 2 skipped (repeats: 16 ok, 2 does not "
                    "fit, 0 failed, 4 skipped)."),
            std::string::npos) << md;
  // The training table says so instead of "failed".
  EXPECT_NE(md.find("| 1 | none | P40-1Q | does not fit |"), std::string::npos) << md;
  const std::string failures = section(md, "## Failed and skipped");
  EXPECT_NE(failures.find("- `share/lenet/b32/T4-16C/best_effort/vms4` repeat 1: skipped: "
                          "T4-16C hosts at most 1 vGPU(s) per GPU"),
            std::string::npos) << failures;
  EXPECT_EQ(failures.find("does_not_fit:"), std::string::npos) << failures;
  const size_t misfits =
      failures.find("Did not fit the profile's framebuffer (results, not failures");
  ASSERT_NE(misfits, std::string::npos) << failures;
  EXPECT_GT(failures.find("- `train/inception_v3/b64/n1/none/P40-1Q` repeat 2: out of device memory"),
            misfits) << failures;
}

TEST(ReportVgpu, ProfilesAndMemoryTables) {
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  const std::string vgpu = section(md, "## vGPU profiles");
  ASSERT_FALSE(vgpu.empty()) << md;
  EXPECT_LT(md.find("## Stragglers"), md.find("## vGPU profiles"));
  EXPECT_LT(md.find("## vGPU profiles"), md.find("## Transport path"));
  // In the sweep's order, not alphabetical; what the catalog numbers the records lack is "-".
  const size_t t4 = vgpu.find("| T4-4C | T4 | 4096 | 4 | emulated: " + kEmulated + " |");
  const size_t p40 = vgpu.find("| P40-1Q | P40 | 1024 | - | emulated: " + kEmulated + " |");
  const size_t t16 = vgpu.find("| T4-16C | T4 | 16384 | 1 | emulated: " + kEmulated + " |");
  ASSERT_NE(t4, std::string::npos) << vgpu;
  ASSERT_NE(p40, std::string::npos) << vgpu;
  ASSERT_NE(t16, std::string::npos) << vgpu;
  EXPECT_LT(t4, p40);
  EXPECT_LT(p40, t16);
  EXPECT_NE(vgpu.find("Real vGPU: none. Emulated: T4-4C, P40-1Q, T4-16C ("), std::string::npos)
      << vgpu;
  EXPECT_TRUE(has_all(vgpu, {"| lenet b32 | T4-4C | 4096 | 1 | fits: peak 413.5 MiB (10.1% of the framebuffer) | "
                             "98.5 ± 6.4 |",
                             "| inception_v3 b64 | P40-1Q | 1024 | 1 | does not fit: needs ≥ 1031.5 MiB (allocation of "
                             "12.5 MiB for onednn tensor with 1019.0 MiB in use) | - |"}));
  // Nothing of the unprofiled training point.
  EXPECT_EQ(vgpu.find("| lenet b32 | none |"), std::string::npos) << vgpu;
}

TEST(ReportVgpu, SharingTableOneVmAgainstFour) {
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()), no_plots());
  const std::string vgpu = section(read_file(dir.path() + "/report.md"), "## vGPU profiles");
  EXPECT_TRUE(has_all(
      vgpu, {"### Sharing one device: lenet, batch 32 per VM, default image size",
             "then 4 VMs of the same profile on one device, slice 2 ms.",
             "| 4 VMs: img/s per VM | 4 VMs: total img/s | 4 VMs: step s | 4 VMs: device util per VM | 4 VMs: "
             "device util total | per-VM img/s, 4 vs 1 |",
             // Per VM 100 (then 101) img/s alone, 24 (24.24) with 4 VMs: 0.24 in both repeats.
             "| T4-4C | best_effort | 100.5 ± 6.4 | 0.3184 | 95.0% | 24.1 ± 1.5 | 96.5 ± 6.1 | 1.3267 | 24.0% | "
             "97.0% | 0.240× ± 0.000 |",
             // fixed_share: a VM alone gets its quarter; the device total was not measured.
             "| T4-4C | fixed_share | 25.1 ± 1.6 | 1.2737 | 25.0% | 24.1 ± 1.5 | 96.5 ± 6.1 | 1.3267 | 24.0% | - | "
             "0.960× ± 0.000 |",
             "| T4-16C | fixed_share | 100.5 ± 6.4 | 0.3184 | 95.0% | skipped |  |  |  |  | - |"}));
  EXPECT_LT(vgpu.find("| T4-4C | best_effort |"), vgpu.find("| T4-4C | fixed_share |"));
  EXPECT_LT(vgpu.find("| T4-4C | fixed_share |"), vgpu.find("| T4-16C | best_effort |"));
  EXPECT_NE(vgpu.find("Under **fixed share**"), std::string::npos) << vgpu;

  const std::string md = read_file(dir.path() + "/report.md");
  const std::string defs = section(md, "## Definitions");
  EXPECT_NE(defs.find("- **device utilization** (per VM)"), std::string::npos) << defs;
  EXPECT_NE(defs.find("- **does not fit**"), std::string::npos) << defs;
  const std::string paths = section(md, "## Transport path");
  EXPECT_NE(paths.find("| " + kShare + "fixed_share/vms4 | n/a | n/a (4 VMs sharing one device, no "
                       "transport) |"),
            std::string::npos) << paths;
}

TEST(ReportVgpu, SummaryCsvAppendsTheVgpuColumns) {
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()), no_plots());
  const std::string text = read_file(dir.path() + "/summary.csv");
  EXPECT_EQ(text.substr(0, text.find('\n')).substr(text.find("busbw_at_bytes")),
            "busbw_at_bytes,policy,vms,device_util_per_vm,device_util_total,"
            "device_memory_peak_mib,framebuffer_mib,vgpu_mode,repeats_does_not_fit");
  const Csv csv(text);
  const std::string be4 = kShare + "best_effort/vms4", fs4 = kShare + "fixed_share/vms4";
  const std::string t16 = "share/lenet/b32/T4-16C/fixed_share/vms4", misfit = "train/inception_v3/b64/n1/none/P40-1Q",
                    t4 = "train/lenet/b32/n1/none/T4-4C";
  expect_cells(csv, {{be4, "kind", "share"},
                     {be4, "policy", "best_effort"},
                     {be4, "vms", "4"},
                     {be4, "total_img_s_median", "96.48"},
                     {be4, "img_s_per_rank_median", "24.12"},
                     {be4, "device_util_per_vm", "0.2400"},
                     {be4, "device_util_total", "0.9700"},
                     {fs4, "device_util_total", ""},
                     {be4, "device_memory_peak_mib", "403.0"},
                     {be4, "framebuffer_mib", "4096"},
                     {be4, "vgpu_mode", "emulated"},
                     {t16, "repeats_ok", "0"},
                     {t16, "total_img_s_median", ""},
                     {misfit, "repeats_failed", "0"},
                     {misfit, "repeats_does_not_fit", "2"},
                     {misfit, "framebuffer_mib", "1024"},
                     {t4, "device_memory_peak_mib", "413.5"},
                     {t4, "policy", ""}});
}

TEST(ReportVgpu, RunWithoutProfilesKeepsItsReportAsBefore) {
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_EQ(md.find("vGPU"), std::string::npos) << md;
  EXPECT_EQ(md.find("does not fit"), std::string::npos) << md;
  EXPECT_EQ(md.find("device utilization"), std::string::npos) << md;
  EXPECT_EQ(md.find("Did not fit"), std::string::npos) << md;
  const std::string csv = read_file(dir.path() + "/summary.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')).size() - csv.find(",busbw_at_bytes"),
            std::string(",busbw_at_bytes").size());
  EXPECT_EQ(csv.find("policy"), std::string::npos);
}

TEST(ReportVgpu, SameRawJsonlGivesTheSameBytes) { expect_same_bytes(vgpu_sweep().jsonl()); }

TEST(ReportVgpu, SharingPlotsDrawnWithGnuplot) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()));
  const std::string md = read_file(dir.path() + "/report.md");
  for (const char* name :
       {"lenet-share-step-time", "lenet-share-utilization", "lenet-share-throughput"}) {
    const std::string base = dir.path() + "/plots/" + name;
    EXPECT_NE(read_file(base + ".svg").find("<svg"), std::string::npos) << name;
    EXPECT_NE(read_file(base + ".gp").find("set xtics ('T4-4C' 0, 'T4-16C' 1)"), std::string::npos)
        << name;
    EXPECT_NE(md.find(std::string("](plots/") + name + ".svg)"), std::string::npos) << name;
  }
  // Skipped 4 VMs points of T4-16C draw no bar; an unmeasured device total neither.
  const std::string dat = read_file(dir.path() + "/plots/lenet-share-utilization.dat");
  EXPECT_NE(dat.find("# best_effort, 4 VMs, device total\n"), std::string::npos) << dat;
  EXPECT_EQ(dat.find("# fixed_share, 4 VMs, device total"), std::string::npos) << dat;
}

TEST(ReportVgpu, OkShareRecordNeedsItsTotal) {
  Sweep s = vgpu_sweep();
  for (auto& r : s.records)
    if (r["kind"] == "share" && r["status"] == "ok") {
      r["share"]["summary"].erase("total_img_s");
      break;
    }
  TempDir dir;
  try {  // an error naming the line: a results directory is untrusted
    write_report(make_run(dir, s.jsonl()), no_plots());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(": status ok but share.summary.total_img_s.mean is missing"), std::string::npos)
        << e.what();
  }
}

TEST(ReportVgpu, CompareSharePointsAndDoesNotFitIsNoRegression) {
  // B: 20% slower, and lenet on T4-4C no longer fits.
  const Sweep slower =
      without_result(vgpu_sweep(0.8), "train/lenet/b32/n1/none/T4-4C", "does_not_fit", "out of device memory");
  const auto [rc, out] = compare(vgpu_sweep().jsonl(), slower.jsonl());
  EXPECT_EQ(rc, 1) << out;
  // The six ok share points are 20% slower; the misfit is not counted against B.
  EXPECT_NE(out.find("6 regressions beyond noise, 0 faster, 1 ok, 0 failed, 2 does not fit, 2 "
                     "skipped"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("with a result in A failed in B"), std::string::npos) << out;
  std::stringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind(kShare + "best_effort/vms4", 0) == 0) {
      EXPECT_NE(l.find("total img/s"), std::string::npos) << l;
      EXPECT_NE(l.find("-20.0"), std::string::npos) << l;
      EXPECT_NE(l.find("REGRESSION"), std::string::npos) << l;
    }
    if (l.rfind("train/lenet/b32/n1/none/T4-4C", 0) == 0) {
      EXPECT_NE(l.find("does not fit"), std::string::npos) << l;
    }
  }
}

}  // namespace
}  // namespace ringbench
