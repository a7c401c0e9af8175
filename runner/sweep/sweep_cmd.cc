#include "runner/sweep/sweep_cmd.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "base/errors.h"
#include "base/input_file.h"
#include "runner/backends/backend.h"
#include "runner/cluster/cluster.h"
#include "runner/job/doctor.h"
#include "runner/job/metadata.h"
#include "runner/sweep/point_args.h"
#include "runner/sweep/run_dir.h"
#include "runner/report/report.h"
#include "runner/sweep/sweep_config.h"
#include "runner/sweep/sweep_exec.h"
#include "runner/job/slurm.h"
#include "runner/job/world.h"
#include "vgpu/catalog.h"
#include "vgpu/detect.h"
#include "runner/analysis/format.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

void catch_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a closed terminal pipe (| head) must not kill us before cleanup
}

std::string utc_now(const char* fmt) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, fmt, &tm);
  return buf;
}

// A results file of the run (untrusted on --resume: a FIFO or /dev/zero there is refused); ""
// when it is missing.
std::string read_text(const std::string& path) {
  if (!fs::exists(path)) return "";
  return read_input_file(path, "the results file", kMaxResultsBytes);
}

std::string fmt_duration(double s) {
  const long t = std::lround(s);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  return buf;
}

// What of the point's JSON goes into its raw record (see runner/report/report.h).
json hosts_subset(const json& meta) {
  json hosts = json::array();
  for (const auto& h : meta.value("hosts", json::array()))
    hosts.push_back({{"rank", h.value("rank", 0)}, {"host", h.value("host", "")}, {"path", h.value("path", json::object())}});
  return hosts;
}

// The profile as the point's rank 0 saw it: mode (real | emulated | mismatch), why, the cap.
json vgpu_subset(const json& meta) {
  const json v = meta.value("vgpu", json::object());
  json out = {{"mode", v.value("mode", "none")}, {"message", v.value("message", "")},
              {"framebuffer_mib", v.value("framebuffer_mib", json(nullptr))}};
  // The profile's own numbers, also where it is real (and so no cap was set).
  for (const char* k : {"gpu", "max_instances", "profile_framebuffer_mib"})
    if (v.contains(k)) out[k] = v[k];
  if (v.contains("detected")) out["detected"] = v["detected"].value("kind", "none");
  return out;
}

json result_subset(const SweepPoint& p, const json& doc) {
  if (p.kind == PointKind::remote) return remote_subset(p, doc);
  const json& meta = doc["meta"];
  if (p.kind == PointKind::share)
    return {{"summary", doc["summary"]}, {"vms", doc["vms"]},
            {"meta", {{"backend", meta.value("backend", "")}, {"threads_per_rank", meta.value("threads_per_rank", 0)},
                      {"steps", meta.value("steps", 0)}, {"warmup", meta.value("warmup", 0)},
                      {"gpu", meta.value("gpu", "")}, {"framebuffer_mib", meta.value("framebuffer_mib", json(nullptr))},
                      {"max_instances", meta.value("max_instances", 1)}, {"slice_ms", meta.value("slice_ms", 0.0)},
                      {"vgpu", vgpu_subset(meta)}}}};
  if (p.kind == PointKind::infer) {  // the scenarios as run (per VM when shared), the memory, and what ran them
    json out = {{"memory", doc.value("memory", json(nullptr))},
                {"meta", {{"input", meta.value("input", "")}, {"backend", meta.value("backend", "")},
                          {"device", meta.value("device", "")}, {"threads", meta.value("threads", 0)},
                          {"allowed_batches", meta.value("allowed_batches", json::array())}}}};
    for (const char* k : {"offline", "single_stream", "server", "device", "vms", "summary"})
      if (doc.contains(k)) out[k] = doc[k];
    if (meta.contains("vgpu")) out["meta"]["vgpu"] = vgpu_subset(meta);
    if (p.shared())
      out["meta"].update({{"gpu", meta.value("gpu", "")}, {"framebuffer_mib", meta.value("framebuffer_mib", json(nullptr))},
                          {"max_instances", meta.value("max_instances", 1)}, {"slice_ms", meta.value("slice_ms", 0.0)}});
    return out;
  }
  if (p.kind == PointKind::train || p.kind == PointKind::migrate) {
    json out = {{"summary", doc["summary"]}, {"per_rank", doc["per_rank"]}, {"ranks", doc["ranks"]},
                {"meta", {{"params", meta.value("params", 0)}, {"backend", meta.value("backend", "")},
                          {"threads_per_rank", meta.value("threads_per_rank", 0)},
                          {"allreduce", meta.value("allreduce", "")}, {"steps", meta.value("steps", 0)},
                          {"warmup", meta.value("warmup", 0)},
                          {"buckets", meta["buckets"].value("list", json::array()).size()},
                          {"hosts", hosts_subset(meta)}, {"vgpu", vgpu_subset(meta)}}}};
    if (meta.contains("autotune")) out["meta"]["autotune"] = meta["autotune"];  // tuned: true's search
    if (doc.contains("input") && doc["input"].is_object()) {  // real data: the pipeline's means (not its per-step lists)
      out["input"] = json::object();
      for (const char* k : {"config", "stall_s_per_step", "images_per_s_per_rank", "pipeline_cpus_per_rank", "skipped",
                            "bad_records", "allow_damaged_data"})
        if (doc["input"].contains(k)) out["input"][k] = doc["input"][k];
    }
    if (p.kind == PointKind::migrate) out["migration"] = doc.value("migration", json(nullptr));  // rank 0's
    return out;
  }
  return {{"rows", doc.value("rows", json::array())},
          {"meta", {{"collective", meta.value("collective", "")}, {"impl", meta.value("impl", "")},
                    {"options", meta.value("options", json::object())}, {"hosts", hosts_subset(meta)}}}};
}

// "123.4 QPS at the p99 bound" in total, or that some VM met it at no rate.
std::string qps_total_text(const json& qps_at_bound) {
  const json& t = qps_at_bound.value("total", json());
  return t.is_number() ? report::num6(std::round(t.get<double>() * 10) / 10) + " QPS at the p99 bound"
                       : "no QPS met the p99 bound on every VM";
}

// A migrate point's progress line: the job's img/s, and the stun or why the rank did not move.
std::string migration_text(const json& doc) {
  const std::string img =
      "ok " + report::num6(std::round(doc["summary"]["total_img_s"]["mean"].get<double>() * 10) / 10) + " img/s";
  const json m = doc.value("migration", json());
  if (!m.is_object()) return img + "; no migration recorded";
  if (!m.value("moved", false))
    return img + "; the migration failed, the rank resumed on its node: " + m.value("error", "?");
  return img + "; " + m.value("method", "?") + " of " + report::num6(m.value("framebuffer_bytes", 0.0) / (1 << 20)) +
         " MiB: stun " + report::num6(std::round(m.value("stun_s", 0.0) * 1000) / 1000) + " s, " +
         report::num6(std::round(m.value("stun_bytes", 0.0) / (1 << 20) * 10) / 10) + " MiB copied stunned";
}

// Why a point failed, in one line: the timeout, the JSON's error, or the ranks' logs. Under
// mpirun a migrate point's standby comes after its ranks, at `standby` (-1: none).
std::string failure(const LaunchOutcome& o, const json& doc, const std::string& log_base, double timeout_s,
                    int standby, const SweepPoint& p) {
  if (o.timed_out)
    return "timed out after " + report::num6(timeout_s) + " s and was killed (logs: " + log_base + ".*.log)";
  if (doc.contains("error")) return doc["error"].get<std::string>();
  for (size_t r = 0; r < o.exit_codes.size(); ++r) {
    if (o.exit_codes[r] == 0) continue;
    std::string who = "rank " + std::to_string(r), log = log_base + ".rank" + std::to_string(r) + ".log";
    if (p.kind == PointKind::remote)
      std::tie(who, log) = remote_process(p, r, log_base);
    else if (int(r) == standby)
      who = "the migration's standby", log = log_base + ".standby.log";
    else if (!fs::exists(log))
      log = log_base + ".mpirun.log";
    const std::string said = error_lines(log);
    return who + " exited with code " + std::to_string(o.exit_codes[r]) + ": " +
           (said.find_first_not_of(" \n") == std::string::npos ? "it wrote nothing (" + log + "); 127: it did not start"
                                                               : said);
  }
  return "no results were written";
}

// A results directory may come from anyone (README, Security): --resume writes nothing through a
// symbolic link planted there, whether one of the sweep's files or a point's log.
void refuse_links_in_run_dir(const std::string& dir) {
  const auto refuse = [](const fs::path& p) {
    std::error_code ec;
    if (fs::is_symlink(fs::symlink_status(p, ec)))
      throw Error("--resume: " + p.string() + " is a symbolic link: a sweep writes only its own files in its "
                  "results directory (remove the link, or resume a copy)");
  };
  for (const char* own : {"raw.jsonl", "env.json", "logs", "tmp", "summary.csv", "report.md", "plots"})
    refuse(fs::path(dir) / own);
  std::error_code ec;
  if (fs::is_directory(fs::path(dir) / "logs", ec))
    for (const auto& e : fs::directory_iterator(fs::path(dir) / "logs", ec)) refuse(e.path());
}

// The sweep's records so far: raw.jsonl is rewritten whole (atomically) after every point.
class RawLog {
 public:
  explicit RawLog(std::string path) : path_(std::move(path)) {
    std::istringstream f(read_text(path_));
    for (std::string line; std::getline(f, line);) {
      if (line.empty()) continue;
      try {
        const json r = json::parse(line);
        lines_.push_back(line);
        if (r.value("status", "") != "failed") done_.insert(key(r["point"], r["repeat"]));
      } catch (const json::exception&) {
        std::cerr << "ringbench sweep: ignoring a damaged line of " << path_ << " (a crash while writing?)\n";
      }
    }
  }
  bool done(const SweepPoint& p) const { return done_.count(key(p.id, p.repeat)) > 0; }
  void append(const json& record) {
    lines_.push_back(record.dump());
    std::string text;
    for (const auto& l : lines_) text += l + "\n";
    write_file_atomic(path_, text);
  }

 private:
  static std::string key(const std::string& id, int repeat) { return id + "#" + std::to_string(repeat); }
  std::string path_;
  std::vector<std::string> lines_;
  std::set<std::string> done_;
};

struct Run {
  SweepConfig config;
  std::string dir, id;
  bool fresh = false;   // a new sweep, not --resume: its directory is created by claim_run_dir
  bool unique = false;  // the default name, which gets a suffix when taken
};

Run prepare_run_dir(const SweepArgs& a) {
  Run run;
  if (!a.resume.empty()) {
    run.dir = a.resume;
    refuse_links_in_run_dir(run.dir);
    const std::string cfg = run.dir + "/config.yaml";
    if (!fs::exists(cfg))
      throw Error("--resume " + run.dir + ": no config.yaml there; is it a sweep's results directory?");
    run.config = load_sweep_config(cfg);
    const json env = json::parse(read_text(run.dir + "/env.json"), nullptr, false);
    run.id = env.is_object() ? env.value("run_id", fs::path(run.dir).filename().string())
                             : fs::path(run.dir).filename().string();
    return run;
  }
  if (a.config.empty()) throw Error("name a sweep config (ringbench sweep configs/quick.yaml) or --resume RUN_DIR");
  run.config = load_sweep_config(a.config);
  run.id = run.config.name + "-" + utc_now("%Y%m%d-%H%M%S");
  run.dir = a.out.empty() ? a.results + "/" + run.id : a.out;
  run.fresh = true;
  run.unique = a.out.empty();
  if (!run.unique && fs::exists(run.dir) && !fs::is_empty(run.dir))
    throw Error(run.dir + " already exists and is not empty: continue it with --resume " + run.dir +
                ", or choose another --out");
  return run;
}

// Creates a fresh run's directory (a taken default name gets a suffix) and locks the directory
// for the whole sweep or resume.
std::unique_ptr<RunDirLock> claim_run_dir(Run& run) {
  if (run.fresh) {
    run.dir = create_run_dir(run.dir, run.unique);
    if (run.unique) run.id = fs::path(run.dir).filename().string();
  }
  auto lock = std::make_unique<RunDirLock>(run.dir);
  std::error_code ec;
  if (run.fresh)  // an --out that another sweep filled between our check and our lock
    for (const auto& e : fs::directory_iterator(run.dir, ec))
      if (e.path().filename() != ".lock")
        throw Error(run.dir + " is no longer empty: another sweep wrote there; choose another --out");
  return lock;
}

// The run directory's config.yaml and env.json (this machine, the command, the cluster and
// doctor's findings).
void write_run_files(const Run& run, const Executor& exec, const std::vector<std::string>& argv, const json& doctor) {
  const SweepConfig& c = run.config;
  fs::create_directories(run.dir + "/logs");
  fs::create_directories(run.dir + "/tmp");
  write_file_atomic(run.dir + "/config.yaml", to_yaml(c));
  json env = environment_info();
  if (!c.vgpu_catalog.empty())  // the GPU as this sweep's catalog names it
    env["vgpu"] = vgpu::to_json(vgpu::detect_gpus(vgpu::Catalog::load(c.vgpu_catalog)));
  env["run_id"] = run.id;
  env["started_at"] = utc_now("%Y-%m-%dT%H:%M:%SZ");
  env["command"] = argv;
  env["seed"] = c.seed;
  env["cluster"] = exec.describe();
  if (!doctor.is_null()) env["doctor"] = doctor;
  write_file_atomic(run.dir + "/env.json", env.dump(2) + "\n");
}

// Point i's raw.jsonl record before it runs: the run, the point and the cluster.
json point_record(const Run& run, const SweepPoint& p, size_t i, size_t total, const json& cluster) {
  json rec = {{"schema", 1}, {"run_id", run.id}, {"sweep", run.config.name}, {"seq", i},
              {"points_total", total}, {"point", p.id}, {"repeat", p.repeat}, {"cluster", cluster},
              {"started_at", utc_now("%Y-%m-%dT%H:%M:%SZ")}};
  p.write(rec);
  if (p.kind == PointKind::share) rec["slice_ms"] = run.config.sharing.slice_ms;
  if (p.kind == PointKind::infer && p.shared()) rec["slice_ms"] = run.config.infer.sharing.slice_ms;
  if (p.kind == PointKind::migrate) rec["migrate_at"] = run.config.migrate.at_step;  // warmup included
  return rec;
}

// "0007-<point id>-r<repeat>", a file name: logs/<this>.log and friends.
std::string point_log_name(size_t i, const SweepPoint& p) {
  char name[32];
  std::snprintf(name, sizeof name, "%04zu-", i);
  std::string log_name = name + p.id + "-r" + std::to_string(p.repeat);
  std::replace(log_name.begin(), log_name.end(), '/', '-');
  return log_name;
}

// Why point p is skipped; "" when it runs.
std::string skip_reason(const SweepConfig& c, const Executor& exec, const SweepPoint& p) {
  std::string why = p.skip.empty() ? remote_unavailable(p) : p.skip;
  if (why.empty()) why = exec.unavailable(p);
  if (const Backend* b = find_backend(p.transport);
      b && b->float_only && p.kind == PointKind::collectives && c.collectives.dtype != "float")
    why = "the " + b->title + " baseline measures float only";
  return why;
}

struct PointVerdict {
  std::string summary;  // the progress line's
  bool failed = false;
};

// A point's status and error into rec, from how its command ended and the JSON it wrote (doc).
PointVerdict judge_point(json& rec, const SweepPoint& p, const LaunchOutcome& o, const json& doc,
                         const std::string& log_base, double timeout_s) {
  const bool infer_results = p.kind == PointKind::infer && (doc.contains("offline") || doc.contains("single_stream") ||
                                                            doc.contains("server") || doc.contains("vms"));
  bool have = doc.is_object() && doc.contains("meta") && doc["meta"].is_object() &&
              (doc.contains("summary") || doc.contains("rows") || infer_results) && !doc.contains("does_not_fit");
  std::string bad_json;
  try {
    if (have) rec[kind_name(p.kind)] = result_subset(p, doc);
  } catch (const std::exception& e) {
    have = false;
    bad_json = std::string("unexpected results JSON: ") + e.what();
  }
  PointVerdict v;
  const bool does_not_fit = doc.is_object() && doc.contains("does_not_fit") && !o.timed_out;
  if (does_not_fit) {
    // A result, not a failure: the model and batch need more than the profile's framebuffer.
    rec.update({{"status", "does_not_fit"}, {"error", doc["does_not_fit"].value("message", "")},
                {"does_not_fit", doc["does_not_fit"]}});
    if (doc.contains("meta") && doc["meta"].contains("vgpu")) rec["vgpu"] = vgpu_subset(doc["meta"]);
    v.summary = "does not fit: " + rec["error"].get<std::string>();
  } else if (!bad_json.empty()) {
    rec.update({{"status", "failed"}, {"error", bad_json}});
    v.summary = "FAILED: " + bad_json;
    v.failed = true;
  } else if (o.ok() && have) {
    rec.update({{"status", "ok"}, {"error", ""}});
    if (p.kind == PointKind::share)
      v.summary = "ok " + report::num6(std::round(doc["summary"]["total_img_s"]["mean"].get<double>() * 10) / 10) +
                  " img/s over " + std::to_string(p.vms) + " VM(s)";
    else if (p.kind == PointKind::migrate)
      v.summary = migration_text(doc);
    else if (p.kind == PointKind::train || p.kind == PointKind::remote)
      v.summary = "ok " + report::num6(std::round(doc["summary"]["total_img_s"]["mean"].get<double>() * 10) / 10) + " img/s";
    else if (p.kind == PointKind::infer && p.shared() && doc["summary"].contains("qps_at_bound"))
      v.summary = "ok " + qps_total_text(doc["summary"]["qps_at_bound"]) + " over " + std::to_string(p.vms) + " VM(s)";
    else
      v.summary = "ok";
  } else {
    rec.update({{"status", "failed"}, {"error", failure(o, doc.is_object() ? doc : json::object(), log_base, timeout_s,
                                          p.kind == PointKind::migrate ? p.nodes : -1, p)}});
    v.summary = "FAILED: " + rec["error"].get<std::string>();
    v.failed = true;
  }
  return v;
}

// After the last point (or an interruption): the report, and the exit code.
int finish_sweep(const Run& run, Executor& exec, size_t failed) {
  finish_serving(exec);
  fs::remove_all(run.dir + "/tmp");
  std::error_code ec;
  const auto recorded = fs::file_size(run.dir + "/raw.jsonl", ec);  // ec: no raw.jsonl yet
  if (g_stop && (ec || recorded == 0)) {
    std::fprintf(stderr, "# interrupted before the first point finished: nothing measured yet, no report; "
                 "continue with: ringbench sweep --resume %s\n", run.dir.c_str());
    return 130;
  }
  write_report(run.dir);
  std::fprintf(stderr, "# report: %s/report.md (regenerate with: ringbench report %s)\n", run.dir.c_str(),
               run.dir.c_str());
  if (g_stop) {
    std::fprintf(stderr, "# interrupted: the report covers the points done so far; continue with: "
                 "ringbench sweep --resume %s\n", run.dir.c_str());
    return 130;
  }
  return failed ? 1 : 0;
}

int drive(Run& run, Executor& exec, const std::vector<std::string>& argv, const json& doctor = nullptr) {
  const auto lock = claim_run_dir(run);
  const SweepConfig& c = run.config;
  write_run_files(run, exec, argv, doctor);

  RawLog raw(run.dir + "/raw.jsonl");
  const std::vector<SweepPoint> points = expand_points(c);
  const json cluster = exec.cluster_record();
  const std::string json_path = run.dir + "/tmp/point.json";
  size_t todo = 0;
  for (const auto& p : points) todo += !raw.done(p) && exec.unavailable(p).empty();
  std::fprintf(stderr, "# ringbench sweep %s: %zu points (%zu to run), results in %s\n", run.id.c_str(),
               points.size(), todo, run.dir.c_str());
  if (!cluster["note"].get<std::string>().empty())
    std::fprintf(stderr, "# note: %s\n", cluster["note"].get<std::string>().c_str());

  double spent = 0;
  size_t ran = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < points.size() && !g_stop; ++i) {
    const SweepPoint& p = points[i];
    if (raw.done(p)) continue;
    json rec = point_record(run, p, i, points.size(), cluster);
    const std::string log_name = point_log_name(i, p);
    const std::string log_base = run.dir + "/logs/" + log_name;
    const std::string why = skip_reason(c, exec, p);
    if (!why.empty()) {
      rec.update({{"status", "skipped"}, {"error", why}, {"wall_s", 0}, {"command", json::array()}});
      raw.append(rec);
      std::fprintf(stderr, "[%zu/%zu] %s r%d: skipped: %s\n", i + 1, points.size(), p.id.c_str(), p.repeat, why.c_str());
      continue;
    }
    std::fprintf(stderr, "[%zu/%zu] %s r%d ...\n", i + 1, points.size(), p.id.c_str(), p.repeat);
    fs::remove(json_path);
    PointJob job{&p, i, point_args(c, p, json_path, log_base), log_base, Millis(static_cast<long>(c.timeout_s * 1000))};
    // A share point's VMs are train jobs on this node: they get its threads (after the --).
    for (auto& x : exec.rank_args(p.kind == PointKind::share ? PointKind::train : p.kind)) job.args.push_back(x);
    const LaunchOutcome o = p.kind == PointKind::remote
                                ? run_remote_point(c.remote, p, c.seed, exec, json_path, log_base, c.timeout_s, &g_stop,
                                                   &job.args)
                                : exec.run(job, &g_stop);
    if (o.interrupted) break;  // not done: --resume runs it again
    const json doc = fs::exists(json_path) ? json::parse(read_text(json_path), nullptr, false) : json();
    rec["wall_s"] = o.wall_s;
    rec["command"] = job.args;
    rec["logs"] = "logs/" + log_name;
    const PointVerdict verdict = judge_point(rec, p, o, doc, log_base, c.timeout_s);
    failed += verdict.failed;
    raw.append(rec);
    ++ran;
    spent += o.wall_s;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double eta = spent / double(ran) * double(todo > ran ? todo - ran : 0);
    std::fprintf(stderr, "[%zu/%zu] %s r%d: %s (%.1f s)  elapsed %s, ETA %s\n", i + 1, points.size(),
                 p.id.c_str(), p.repeat, verdict.summary.c_str(), o.wall_s, fmt_duration(elapsed).c_str(),
                 fmt_duration(eta).c_str());
  }
  return finish_sweep(run, exec, failed);
}

// Starts the sweep as an mpirun job on the config's hosts.
int exec_mpirun(const SweepConfig& c, const std::vector<std::string>& argv) {
  std::string hosts;
  // ranks_per_node R: R slots a host, filled host by host, so that a node's ranks are consecutive.
  const int per = c.cluster.ranks_per_node;
  for (const auto& h : c.cluster.hosts)
    hosts += (hosts.empty() ? "" : ",") + h + (per > 1 ? ":" + std::to_string(per) : std::string());
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(c.cluster.hosts.size() * size_t(per)), "-H", hosts,
                                   "--map-by", per > 1 ? "slot" : "node"};
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  args.push_back(self_exe());
  args.insert(args.end(), argv.begin() + 1, argv.end());
  std::fprintf(stderr, "# cluster type mpirun: running the sweep as");
  for (const auto& x : args) std::fprintf(stderr, " %s", x.c_str());
  std::fprintf(stderr, "\n");
  std::vector<char*> cargv;
  for (auto& x : args) cargv.push_back(x.data());
  cargv.push_back(nullptr);
  execvp("mpirun", cargv.data());
  throw Error(std::string("cannot run mpirun: ") + std::strerror(errno));
}

}  // namespace

int run_sweep(const SweepArgs& a, const std::vector<std::string>& argv) {
  if (!a.config.empty() && !a.resume.empty())
    throw Error("give either a config or --resume RUN_DIR (which reruns its own config.yaml), not both");
  catch_signals();
  // srun's tasks are sweep ranks as mpirun's are (runner/job/slurm.h).
  const bool under_mpirun = (launched_by_mpirun() || launched_by_slurm()) && !launched_by_env();
  if (under_mpirun) {
    WorldOptions wo;
    wo.timeout = Millis(120000);
    auto world = make_world(wo, false);
    // Every sweep rank loads the config itself, and all check they loaded the same one.
    const std::string path = a.resume.empty() ? a.config : a.resume + "/config.yaml";
    SweepConfig config;
    try {
      config = load_sweep_config(path);
    } catch (const Error& e) {
      throw Error("sweep rank " + std::to_string(world->rank) + ": " + e.what() +
                  " (under mpirun every host reads the config at the same path; for --resume the run "
                  "directory must be on a shared filesystem)");
    }
    check_same_sweep(*world, config);
    // The preflight every host runs first (ringbench doctor): its verdicts go to the log, the
    // whole report to env.json. A different build or config has already stopped every rank.
    const json doctor = doctor_checks(*world, config_hash(config), Millis(60000));
    if (world->rank == 0) {
      for (const json& v : doctor["verdicts"])
        std::fprintf(stderr, "# doctor: %s: %s, %s\n", v["check"].get<std::string>().c_str(),
                     v["status"].get<std::string>().c_str(), v["text"].get<std::string>().c_str());
    }
    if (world->rank != 0) {
      serve_points(*world, config, &g_stop);
      return 0;
    }
    Run run = prepare_run_dir(a);
    auto exec = make_mpi_executor(run.config, *world);
    return drive(run, *exec, argv, doctor);
  }

  Run run = prepare_run_dir(a);
  const SweepConfig& c = run.config;
  if (a.dry_run) {
    for_each_point(c, [](const SweepPoint& p) {
      std::string why = p.skip.empty() ? remote_unavailable(p) : p.skip;
      if (why.empty()) why = backend_unavailable(p.transport);
      std::printf("%-44s r%d  %s\n", p.id.c_str(), p.repeat, why.empty() ? "" : ("skipped: " + why).c_str());
    });
    return 0;
  }
  if (c.cluster.type == "mpirun") {
    if (c.cluster.hosts.empty())
      throw Error("cluster type mpirun: launch the sweep with mpirun (mpirun -np 4 -H a,b,c,d ringbench "
                  "sweep CONFIG), or list cluster.hosts and ringbench runs mpirun itself");
    return exec_mpirun(c, argv);
  }
  std::unique_ptr<EmulatedCluster> cluster;
  std::string note;
  if (c.cluster.type == "emulated") {
    std::string why;
    if (can_emulate_cluster(&why)) {
      ClusterSpec spec;
      spec.nodes = cluster_nodes(c);
      spec.link = c.cluster.link;
      cluster = EmulatedCluster::up(spec);
      note = "emulated cluster: " + std::to_string(spec.nodes) + " network namespaces on one bridge, each link " +
             spec.link + " (tc htb) both ways; htb lets a burst of 1 ms at the link rate through unshaped, so "
             "messages smaller than that can beat the link rate; no added latency (no netem)";
    } else {
      note = "FALLBACK: the emulated cluster could not be created (" + why +
             "), so the ranks ran on loopback with no link-rate limit";
      std::fprintf(stderr, "# %s\n", note.c_str());
    }
  }
  auto exec = make_local_executor(c, cluster.get(), note);
  return drive(run, *exec, argv);
}

}  // namespace ringbench
