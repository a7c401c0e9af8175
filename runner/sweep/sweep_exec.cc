#include "runner/sweep/sweep_exec.h"

#include <dirent.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "collectives/auth.h"
#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/store.h"
#include "ringbench/config.h"
#include "ringbench/git_commit.h"
#include "runner/backends/backend.h"
#include "runner/job/gpu.h"
#include "runner/job/metadata.h"
#include "runner/job/mpi_util.h"
#include "runner/migrate/target_process.h"
#include "runner/sweep/point_args.h"
#include "base/subprocess.h"
#include "runner/sweep/sweep_messages.h"
#include "vgpu/detect.h"

namespace ringbench {
namespace {

using json = nlohmann::json;

// A rank that failed gives its peers this long to report their own view before they are killed.
constexpr Millis kGrace{30000};

bool needs_mpirun(const SweepPoint& p) {
  const Backend* b = find_backend(p.transport);
  return b && b->needs_mpirun;
}

std::string random_id() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

// mpirun for the MPI_Allreduce baseline, wherever it runs: n ranks, unbound, over Open MPI's TCP
// BTL only (never shared memory, which would not be the network the other transports cross).
std::vector<std::string> mpirun_baseline_argv(int n) {
  std::vector<std::string> a = {find_on_path("mpirun"), "-np", std::to_string(n), "--bind-to", "none",
                                "--mca", "pml", "ob1", "--mca", "btl", "tcp,self"};
  if (geteuid() == 0) a.push_back("--allow-run-as-root");
  return a;
}

// The ranks mpirun starts: this ringbench with the point's arguments, waiting passively.
void append_rank_command(std::vector<std::string>& argv, const std::vector<std::string>& args) {
  argv.insert(argv.end(), {"-x", "OMP_WAIT_POLICY=passive", self_exe()});
  argv.insert(argv.end(), args.begin(), args.end());
}

// The CPUs this process may use, by their numbers (a container's may be 8-15, not 0-7).
std::vector<int> usable_cpus() {
  std::vector<int> cpus = migrate::affinity();
  for (int c = 0; cpus.empty() && c < int(std::max(1u, std::thread::hardware_concurrency())); ++c) cpus.push_back(c);
  return cpus;
}

// A point's rank learns its world, and the point's secret, from its environment: never from a
// command line that `ps` shows.
std::vector<std::string> rank_env(int rank, int n, const std::string& store, const std::string& job,
                                  const std::string& launcher, const std::string& secret) {
  return {"RINGBENCH_RANK=" + std::to_string(rank), "RINGBENCH_WORLD_SIZE=" + std::to_string(n),
          "RINGBENCH_STORE=" + store, "RINGBENCH_JOB_ID=" + job, "RINGBENCH_LAUNCHER=" + launcher,
          secret_env(secret)};
}

class LocalExecutor : public Executor {
 public:
  ~LocalExecutor() override {
    if (!agent_dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(agent_dir_, ec);
    }
  }

  LocalExecutor(const SweepConfig& c, EmulatedCluster* cluster, std::string note)
      : cluster_(cluster), note_(std::move(note)), cpu_ids_(usable_cpus()), cores_(int(cpu_ids_.size())),
        migrate_node_(c.has_migrate ? c.migrate.target_node() : -1), per_node_(c.cluster.ranks_per_node) {
    const int max_nodes = cluster_nodes(c);
    cpus_per_node_ = local_cpus_per_node(c, max_nodes);
    if (cpus_per_node_ > cores_)
      throw Error("cluster.cpus_per_node is " + std::to_string(cpus_per_node_) + " but this machine has " +
                  std::to_string(cores_) + " usable cores");
    shared_cores_ = cpus_per_node_ * max_nodes > cores_;
    if (shared_cores_)
      note_ += std::string(note_.empty() ? "" : "; ") + std::to_string(max_nodes) + " nodes of " +
               std::to_string(cpus_per_node_) + " CPU(s) share " + std::to_string(cores_) +
               " cores, so scaling above " + std::to_string(std::max(1, cores_ / cpus_per_node_)) +
               " node(s) measures CPU contention as much as the network";
  }

  std::string unavailable(const SweepPoint& p) const override {
    if (cluster_ && p.nodes > cluster_->nodes())
      return "needs " + std::to_string(p.nodes) + " nodes; the emulated cluster has " +
             std::to_string(cluster_->nodes());
    if (cluster_ && p.kind == PointKind::migrate && migrate_node_ >= cluster_->nodes())
      return "moves a rank to node " + std::to_string(migrate_node_) + "; the emulated cluster has " +
             std::to_string(cluster_->nodes()) + " nodes";
    std::string why = backend_unavailable(p.transport);
    // Every rank of a local or emulated point runs on this machine, each on a GPU of its own.
    if (const Backend* b = find_backend(p.transport); why.empty() && b && b->gpu_buffers && p.nodes * per_node_ > gpu_count())
      why = b->name + ": " + std::to_string(p.nodes * per_node_) + " ranks on this machine need a GPU each (" + b->title +
            " runs one rank per GPU); it has " + std::to_string(gpu_count());
    if (const Backend* b = find_backend(p.transport); why.empty() && b && b->one_host && cluster_)
      why = b->name + ": the emulated cluster's nodes are hosts of their own, and shared memory between them "
            "would bypass their links";
    return why;
  }

  LaunchOutcome run(const PointJob& job, const std::atomic<bool>* stop) override {
    if (needs_mpirun(*job.point)) return run_mpirun(job, stop);
    // The point's rendezvous store; on an emulated cluster it listens on the bridge.
    int port = 0, fd = -1;
    std::string host = "127.0.0.1";
    if (cluster_) {
      host = cluster_->switch_addr();
      std::string err;
      std::thread([&] {  // setns() moves only this thread; the socket stays in the switch
        if (setns(cluster_->switch_ns_fd(), CLONE_NEWNET) != 0) {
          err = std::string("setns into the switch namespace: ") + std::strerror(errno);
          return;
        }
        try {
          fd = net::listen_tcp(host, 0, &port);
        } catch (const std::exception& e) {
          err = e.what();
        }
      }).join();
      if (fd < 0) throw Error("cannot host the point's store on the emulated cluster: " + err);
    } else {
      fd = net::listen_tcp(host, 0, &port);
    }
    const std::string secret = auth::new_secret();  // each point is a job of its own
    TcpStoreServer server(fd, secret);
    const std::string store = host + ":" + std::to_string(port), id = random_id();
    std::vector<RankLaunch> ranks;
    const int n = job.point->nodes * per_node_;  // cluster.ranks_per_node: consecutive ranks on each node
    for (int k = 0; k < n; ++k) {
      const int node = k / per_node_;
      RankLaunch r;
      r.argv = {self_exe()};
      r.argv.insert(r.argv.end(), job.args.begin(), job.args.end());
      r.env = rank_env(k, n, store, id, cluster_ ? "emulated" : "local", secret);
      r.env.push_back("OMP_WAIT_POLICY=passive");
      const Backend* b = find_backend(job.point->transport);
      if (cluster_ && b && b->node_env)  // each emulated node a host of its own to the backend
        for (auto& e : b->node_env("ringbench-" + id + "-node" + std::to_string(node), cluster_->node_iface()))
          r.env.push_back(e);
      r.log_path = job.log_base + ".rank" + std::to_string(k) + ".log";
      r.netns_fd = cluster_ ? cluster_->node_ns_fd(node) : -1;
      r.cpus = node_cpus(node);
      ranks.push_back(std::move(r));
    }
    return run_ranks(ranks, job.timeout, kGrace, stop);
  }

  LaunchOutcome run_processes(const std::vector<PointProcess>& procs, Millis timeout,
                              const std::atomic<bool>* stop) override {
    std::vector<RankLaunch> launches;
    for (const auto& p : procs) {
      RankLaunch r;
      r.argv = {self_exe()};
      r.argv.insert(r.argv.end(), p.args.begin(), p.args.end());
      r.env = p.env;
      r.env.push_back("OMP_WAIT_POLICY=passive");
      r.log_path = p.log_path;
      r.netns_fd = cluster_ ? cluster_->node_ns_fd(p.node) : -1;
      r.cpus = node_cpus(p.node);
      launches.push_back(std::move(r));
    }
    return run_ranks(launches, timeout, kGrace, stop);
  }

  std::string node_addr(int node) const override { return cluster_ ? cluster_->node_addr(node) : "127.0.0.1"; }
  int cpus_per_node() const override { return cpus_per_node_; }

  json cluster_record() const override {
    json r = {{"type", cluster_ ? "emulated" : "local"},
              {"link", cluster_ ? json(cluster_->spec().link) : json(nullptr)},
              {"cpus_per_node", cpus_per_node_}, {"note", note_}};
    if (per_node_ > 1) r["ranks_per_node"] = per_node_;
    return r;
  }

  json describe() const override {
    json d = cluster_ ? cluster_->describe() : json{{"type", "local"}, {"addr", "127.0.0.1"}};
    d["cpus_per_node"] = cpus_per_node_;
    d["cores"] = cores_;
    d["note"] = note_;
    return d;
  }

  std::vector<std::string> rank_args(PointKind kind) const override {
    std::vector<std::string> a;
    if (kind == PointKind::infer) return {"--threads", std::to_string(cpus_per_node_)};  // no network
    if (kind == PointKind::train || kind == PointKind::migrate) a = {"--threads", std::to_string(cpus_per_node_)};
    if (cluster_) a.insert(a.end(), {"--iface", cluster_->node_iface()});
    // The moving rank starts its target in the namespace of the node it moves to.
    if (cluster_ && kind == PointKind::migrate) {
      std::string cpus;
      for (int c : node_cpus(migrate_node_)) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
      a.insert(a.end(), {"--migrate-netns", cluster_->node_ns(migrate_node_), "--migrate-cpus", cpus});
    }
    return a;
  }

 private:
  // The MPI_Allreduce baseline: Open MPI over TCP (never shared memory, which would not be the
  // network the other transports cross), launched by mpirun as one process tree.
  LaunchOutcome run_mpirun(const PointJob& job, const std::atomic<bool>* stop) {
    const int n = job.point->nodes, per = per_node_;
    RankLaunch r;
    r.argv = mpirun_baseline_argv(n * per);
    r.argv.push_back("--oversubscribe");
    // Ranks sharing cores must yield while they poll, as our ring's ranks sleep after --spin-us.
    if (shared_cores_) r.argv.insert(r.argv.end(), {"--mca", "mpi_yield_when_idle", "1"});
    if (cluster_) {
      // mpirun runs in the switch namespace and starts each rank in its node's namespace
      // through an rsh agent that runs `ip netns exec`.
      std::string hosts;
      for (int k = 0; k < n; ++k) {  // appended piece by piece: GCC 12's -Wrestrict misfires on "," + std::string
        if (k) hosts += ',';
        hosts += 'n' + std::to_string(k);
        if (per > 1) hosts += ':' + std::to_string(per);
      }
      const std::string subnet = cluster_->spec().subnet + ".0/24";
      for (const auto& kv : {std::pair{"btl_tcp_if_include", subnet}, {"oob_tcp_if_include", subnet},
                             {"plm_rsh_agent", agent_script()}})
        r.argv.insert(r.argv.end(), {"--mca", kv.first, kv.second});
      r.argv.insert(r.argv.end(), {"-H", hosts, "--map-by", per > 1 ? "slot" : "node"});
      r.netns_fd = cluster_->switch_ns_fd();
    } else {
      r.argv.insert(r.argv.end(), {"--mca", "btl_tcp_if_include", "lo"});
    }
    append_rank_command(r.argv, job.args);
    r.log_path = job.log_base + ".mpirun.log";
    return run_ranks({r}, job.timeout, kGrace, stop);
  }

  std::vector<int> node_cpus(int node) const {
    std::vector<int> cpus;
    for (int i = 0; i < cpus_per_node_; ++i) cpus.push_back(cpu_ids_[size_t((node * cpus_per_node_ + i) % cores_)]);
    return cpus;
  }

  // Open MPI calls the agent like ssh: AGENT HOST COMMAND...; the command is a shell string.
  // Each node's daemon gets its own session directory, as on separate machines (daemons
  // sharing one race to create it).
  std::string agent_script() {
    if (!agent_dir_.empty()) return agent_dir_ + "/agent.sh";
    char tmpl[] = "/tmp/ringbench-mpirun-XXXXXX";
    if (!mkdtemp(tmpl)) throw Error(std::string("cannot create a directory for mpirun's agent: ") + std::strerror(errno));
    agent_dir_ = tmpl;
    const std::string prefix = cluster_->node_ns(0).substr(0, cluster_->node_ns(0).rfind("-n"));
    std::string cpus_case;  // each node's daemon, and so its rank, on the node's CPUs
    for (int k = 0; k < cluster_->nodes(); ++k) {
      std::string list;
      for (int c : node_cpus(k)) {
        if (!list.empty()) list += ',';
        list += std::to_string(c);
      }
      cpus_case += "  n" + std::to_string(k) + ") cpus=" + list + " ;;\n";
    }
    const std::string text =
        "#!/bin/sh\n# ringbench: mpirun's rsh agent for the emulated cluster\nhost=$1\nshift\n"
        "case $host in\n" + cpus_case + "  *) echo \"agent: unknown node $host\" >&2; exit 1 ;;\nesac\n"
        "export OMPI_MCA_orte_tmpdir_base=" + agent_dir_ + "/$host\nmkdir -p \"$OMPI_MCA_orte_tmpdir_base\"\n"
        "exec ip netns exec " + prefix + "-$host taskset -c $cpus /bin/sh -c \"$*\"\n";
    write_file_atomic(agent_dir_ + "/agent.sh", text);
    chmod((agent_dir_ + "/agent.sh").c_str(), 0755);
    return agent_dir_ + "/agent.sh";
  }

  EmulatedCluster* cluster_;
  std::string note_;
  std::vector<int> cpu_ids_;
  int cores_, migrate_node_, per_node_, cpus_per_node_ = 1;
  bool shared_cores_ = false;
  std::string agent_dir_;
};

// Control messages of the sweep under mpirun go through the world's TCP store: waiting ranks
// sleep in a socket read instead of spinning in an MPI call next to the ranks being measured.
std::string cmd_key(int64_t i) { return "sweep/cmd/" + std::to_string(i); }
std::string res_key(int64_t i, int r) { return "sweep/res/" + std::to_string(i) + "/" + std::to_string(r); }

// One sweep rank's part of a point: its rank of the point, as a child process.
json run_my_rank(const std::vector<std::string>& args, int rank, int nodes, const std::string& store,
                 const std::string& job, const std::string& secret, const std::string& log_path, Millis timeout,
                 const std::atomic<bool>* stop) {
  RankLaunch r;
  r.argv = {self_exe()};
  r.argv.insert(r.argv.end(), args.begin(), args.end());
  r.env = rank_env(rank, nodes, store, job, "mpirun-sweep", secret);
  r.log_path = log_path;
  LaunchOutcome o = run_ranks({r}, timeout, kGrace, stop);
  std::ifstream f(log_path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string log = ss.str();
  if (log.size() > 65536) log = "[...]\n" + log.substr(log.size() - 65536);
  return {{"code", o.exit_codes[0]}, {"timed_out", o.timed_out}, {"interrupted", o.interrupted},
          {"wall_s", o.wall_s}, {"log", log}};
}

// Under mpirun a migrate point's target is a standby that node B's sweep rank starts with the job.
std::vector<std::string> mpirun_rank_args(PointKind kind) {
  if (kind == PointKind::migrate) return {"--migrate-to", "standby"};
  return {};
}

// The sweep rank that runs a migrate point's standby (node B), or -1.
int standby_node(const SweepConfig& c, const SweepPoint& p) {
  return p.kind == PointKind::migrate && c.has_migrate ? c.migrate.target_node() : -1;
}

// Node B's sweep rank: the moving rank's standby target, its result under that sweep rank's key.
json run_standby(const SweepConfig& c, const SweepPoint& p, std::vector<std::string> args, const std::string& store,
                 const std::string& job, const std::string& secret, const std::string& log_path, Millis timeout,
                 const std::atomic<bool>* stop) {
  args.push_back("--migrate-standby");
  return run_my_rank(args, c.migrate.moving_rank(), p.nodes, store, job, secret, log_path, timeout, stop);
}

class MpiWorkerExecutor : public Executor {
 public:
  MpiWorkerExecutor(const SweepConfig& c, World& w) : c_(c), w_(w) {}

  std::vector<std::string> rank_args(PointKind kind) const override { return mpirun_rank_args(kind); }

  std::string unavailable(const SweepPoint& p) const override {
    if (point_ranks(c_, p) > w_.size)
      return "needs " + std::to_string(point_ranks(c_, p)) + " ranks (" + std::to_string(p.nodes) + " nodes x " +
             std::to_string(c_.cluster.ranks_per_node) + "); mpirun started " + std::to_string(w_.size) + " rank(s)";
    if (standby_node(c_, p) >= w_.size)
      return "moves a rank to node " + std::to_string(standby_node(c_, p)) + "; mpirun started " +
             std::to_string(w_.size) + " rank(s)";
    if (const Backend* b = find_backend(p.transport); b && b->one_host && p.nodes > 1)
      return b->name + ": the point's ranks run on the cluster's hosts, and shared memory connects only the ranks "
             "of one host";
    if (p.kind == PointKind::remote)
      return "remote points run on a local or emulated cluster (the sweep starts the device server and its clients "
             "as processes on this machine)";
    return backend_unavailable(p.transport);
  }

  LaunchOutcome run(const PointJob& job, const std::atomic<bool>* stop) override {
    if (needs_mpirun(*job.point)) return run_nested_mpirun(job, stop);
    const int n = point_ranks(c_, *job.point);
    // On the address the sweep ranks reach rank 0 by, for ranks that know the sweep's secret.
    TcpStoreServer server(w_.default_addr, 0, w_.secret);
    const std::string store = w_.default_addr + ":" + std::to_string(server.port()), id = random_id();
    const json cmd = {{"op", "run"}, {"point", job.index}, {"store", store}, {"job", id}};
    w_.store->set(cmd_key(++seq_), cmd.dump());
    json mine = run_my_rank(job.args, 0, n, store, id, w_.secret, job.log_base + ".rank0.log", job.timeout, stop);
    LaunchOutcome out;
    out.exit_codes.push_back(mine["code"]);
    out.timed_out = mine["timed_out"];
    out.interrupted = mine["interrupted"];
    out.wall_s = mine["wall_s"];
    const int standby = standby_node(c_, *job.point);  // last: after the ranks, their standby
    for (int k = 1; k < n + (standby >= 0); ++k) {
      const int r = k < n ? k : standby;
      json res;
      try {
        res = point_result(get_from_rank(*w_.store, res_key(seq_, r), r, job.timeout + 2 * kGrace), res_key(seq_, r), r);
      } catch (const std::exception& e) {
        res = {{"code", -1}, {"timed_out", true}, {"interrupted", false}, {"wall_s", 0},
               {"log", std::string("ringbench sweep: no word from sweep rank ") + std::to_string(r) +
                           " about this point: " + e.what() + "\n"}};
      }
      out.exit_codes.push_back(res["code"].get<int>());
      out.timed_out = out.timed_out || res["timed_out"].get<bool>();
      out.interrupted = out.interrupted || res["interrupted"].get<bool>();
      write_file_atomic(job.log_base + (r < n ? ".rank" + std::to_string(r) : std::string(".standby")) + ".log",
                        res["log"].get<std::string>());
    }
    return out;
  }

  json cluster_record() const override {
    const std::string placement =
        (c_.cluster.ranks_per_node > 1
             ? "a point on N nodes runs on sweep ranks 0..N x " + std::to_string(c_.cluster.ranks_per_node) +
                   " - 1, " + std::to_string(c_.cluster.ranks_per_node) + " consecutive ranks a host"
             : std::string("a point on N nodes runs on sweep ranks 0..N-1")) +
        (c_.has_migrate ? "; a migrating rank's standby target on sweep rank " + std::to_string(c_.migrate.target_node())
                        : std::string());
    if (on_tcg_guests())
      return {{"type", "guests"}, {"link", nullptr}, {"cpus_per_node", nullptr},
              {"note", std::to_string(w_.size) + " qemu TCG guests under mpirun: an emulated CPU, so "
                       "speeds prove the path, not the hardware's speed; " + placement}};
    return {{"type", "mpirun"}, {"link", nullptr}, {"cpus_per_node", nullptr},
            {"note", std::to_string(w_.size) + " sweep ranks under " + launcher_name() + "; " + placement}};
  }

  json describe() const override { return {{"type", "mpirun"}, {"ranks", w_.size}, {"hosts", host_records()}}; }

  // What started the sweep ranks, as the header and the report name it (the world knows: a
  // rank under mpirun inside an allocation has Slurm's variables too).
  std::string launcher_name() const { return w_.launcher == "slurm" ? "srun" : "mpirun"; }

  void finish() {
    w_.store->set(cmd_key(++seq_), json{{"op", "done"}}.dump());
  }

 private:
  // The MPI_Allreduce baseline needs its ranks to be MPI ranks of one job, which the children
  // of the sweep ranks are not. Rank 0 therefore starts a job of its own: mpirun on the hosts of
  // sweep ranks 0..N-1, through the same launcher that started the sweep (ssh; srun inside a
  // Slurm allocation, Open MPI's choice there), while those
  // ranks wait for the next point. The outer job's Open MPI/PMIx variables are dropped, so the
  // inner mpirun starts a fresh job instead of joining the outer one (the same on Open MPI 4
  // and 5). A sub-communicator of the outer job would have no timeout: one hung point would hang
  // the sweep; a separate mpirun is a process tree that the point's deadline kills.
  LaunchOutcome run_nested_mpirun(const PointJob& job, const std::atomic<bool>* stop) {
    const int n = point_ranks(c_, *job.point);
    std::string hosts;  // a host listed once per rank: as many slots, filled in order by slot
    for (int r = 0; r < n; ++r) {
      if (r) hosts += ',';
      hosts += sweep_host(r);
    }
    RankLaunch l;
    l.argv = mpirun_baseline_argv(n);
    l.argv.insert(l.argv.end(), {"-H", hosts, "--map-by", c_.cluster.ranks_per_node > 1 ? "slot" : "node"});
    // Over the network our ring uses: the interface of the sweep's own address.
    const std::string iface = net::iface_of_ipv4(w_.default_addr);
    if (!iface.empty())
      l.argv.insert(l.argv.end(), {"--mca", "btl_tcp_if_include", iface, "--mca", "oob_tcp_if_include", iface});
    append_rank_command(l.argv, job.args);
    l.unset = {"OMPI_", "PMIX_", "ORTE_", "OPAL_", "PRTE_"};
    // Inside a Slurm allocation Open MPI starts its daemons with srun, as a new step; the
    // sweep's own step (srun's tasks, or the outer mpirun's daemons) holds the allocation's
    // CPUs, and since Slurm 20.11 a new step waits for free ones, so it would wait until the
    // point's deadline. Elsewhere the variable means nothing.
    if (std::getenv("SLURM_JOB_ID")) l.env.push_back("SLURM_OVERLAP=1");
    l.log_path = job.log_base + ".mpirun.log";
    return run_ranks({l}, job.timeout, kGrace, stop);
  }

  // What every sweep rank published about its host (environment_info()), read from the store
  // once: env.json, the hosts of the MPI baseline and the guests check all come from it.
  const json& host_records() const {
    if (hosts_.is_null()) {
      json all = json::array();
      for (int k = 0; k < w_.size; ++k) all.push_back(get_rank_json(*w_.store, "sweep/host/" + std::to_string(k), k, Millis(60000)));
      hosts_ = std::move(all);
    }
    return hosts_;
  }

  // A field of the "host" part of sweep rank k's record (null when it has none).
  json host_field(int k, const char* key) const {
    const json& h = host_records()[static_cast<size_t>(k)];
    return h.contains("host") && h["host"].is_object() ? h["host"].value(key, json()) : json();
  }

  // The host name sweep rank r published, checked before it goes on mpirun's command line.
  std::string sweep_host(int r) const {
    const json name = host_field(r, "host");
    if (!name.is_string() || !valid_host_name(name.get<std::string>()))
      throw Error("sweep rank " + std::to_string(r) + " published no usable host name (" + name.dump() + ")");
    return name;
  }

  // Every sweep rank's CPU is qemu's TCG (an emulated CPU, as in tests/rdma/'s guests).
  bool on_tcg_guests() const {
    for (int k = 0; k < w_.size; ++k) {
      const json cpu = host_field(k, "cpu");
      if (!cpu.is_string() || cpu.get<std::string>().find("QEMU TCG") == std::string::npos) return false;
    }
    return true;
  }

  const SweepConfig& c_;
  World& w_;
  int64_t seq_ = 0;
  mutable json hosts_;  // host_records(), once read
};

}  // namespace

LaunchOutcome Executor::run_processes(const std::vector<PointProcess>&, Millis, const std::atomic<bool>*) {
  throw Error("this cluster runs no point of processes with their own arguments (remote points)");
}

int local_cpus_per_node(const SweepConfig& c, int max_nodes) {
  if (c.cluster.cpus_per_node > 0) return c.cluster.cpus_per_node;
  return std::max(1, int(usable_cpus().size()) / std::max(1, max_nodes));
}

std::unique_ptr<Executor> make_local_executor(const SweepConfig& c, EmulatedCluster* cluster,
                                              const std::string& note) {
  return std::make_unique<LocalExecutor>(c, cluster, note);
}

std::unique_ptr<Executor> make_mpi_executor(const SweepConfig& c, World& world) {
  world.store->set("sweep/host/0", environment_info().dump());
  return std::make_unique<MpiWorkerExecutor>(c, world);
}

void finish_serving(Executor& e) {
  if (auto* m = dynamic_cast<MpiWorkerExecutor*>(&e)) m->finish();
}

void serve_points(World& w, const SweepConfig& c, const std::atomic<bool>* stop) {
  w.store->set("sweep/host/" + std::to_string(w.rank), environment_info().dump());
  char dir_tmpl[] = "/tmp/ringbench-sweep-XXXXXX";
  if (!mkdtemp(dir_tmpl)) throw Error(std::string("cannot create a directory for the point logs: ") + std::strerror(errno));
  const std::string dir = dir_tmpl, log_path = dir + "/rank.log";
  const std::vector<SweepPoint> points = expand_points(c);
  const Millis timeout(static_cast<long>(c.timeout_s * 1000));
  for (int64_t i = 1;; ++i) {
    json cmd;
    for (;;) {  // points can take long: wait in slices, leave when told to stop
      if (stop && stop->load()) return;
      try {
        cmd = get_rank_json(*w.store, cmd_key(i), 0, Millis(5000));
        break;
      } catch (const TimeoutError&) {
      }
    }
    const PointCommand pc = parse_command(cmd, i, points.size());
    if (pc.done) break;
    const SweepPoint& p = points[pc.index];
    const bool standby = w.rank == standby_node(c, p);
    if (w.rank >= point_ranks(c, p) && !standby) continue;
    // The same command line rank 0 built; only rank 0 writes the JSON.
    std::vector<std::string> args = point_args(c, p, dir + "/point.json", dir + "/point");
    for (auto& x : mpirun_rank_args(p.kind)) args.push_back(x);
    const json res = standby ? run_standby(c, p, args, pc.store, pc.job, w.secret, log_path, timeout, stop)
                             : run_my_rank(args, w.rank, point_ranks(c, p), pc.store, pc.job, w.secret, log_path, timeout, stop);
    w.store->set(res_key(i, w.rank), res.dump());
  }
  unlink(log_path.c_str());
  rmdir(dir_tmpl);
}

void check_same_sweep(World& w, const SweepConfig& c) {
  const std::string mine = "config sha256 " + config_hash(c) + ", ringbench " +
                           RINGBENCH_VERSION + " " + RINGBENCH_GIT_COMMIT;
  check_same_options(*w.store, "sweep/same", mine, w.rank, w.size, Millis(120000),
                     "load the same sweep config with the same ringbench build");
}

json environment_info() {
  json e;
  e["host"] = host_info();
  e["build"] = build_info();
  e["mpirun"] = on_path("mpirun") ? command_line_output("mpirun --version | head -1") : "not found";
  const std::string gpus = on_path("nvidia-smi") ? command_line_output("nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader") : "";
  e["gpu"] = gpus.empty() ? json("none (no nvidia-smi or no GPU)") : json(gpus);
  e["vgpu"] = vgpu::to_json(vgpu::detect_gpus());  // what a point's profile is checked against
  // The CUDA device as this build sees it: name, driver and runtime CUDA, cuDNN, cuBLAS, NCCL,
  // memory; or why there is none.
  const json dev = gpu_json(-1);
  release_gpu_context();  // the sweep computes nothing on it: its points get the memory
  e["cuda_device"] = dev;
  e["cuda"] = !built_with_cuda() ? json("not built (RINGBENCH_WITH_CUDA=OFF)")
              : dev.value("available", false) ? json("driver " + dev.value("driver_cuda", std::string("?")) +
                                                     ", runtime " + dev.value("runtime_cuda", std::string("?")))
                                              : json("built; " + dev.value("reason", std::string("no device")));
  e["cudnn"] = !built_with_cuda() ? json("not built (RINGBENCH_WITH_CUDA=OFF)") : json(dev.value("cudnn", "unknown (no device)"));
  e["nccl"] = !built_with_nccl() ? json("not built (RINGBENCH_WITH_NCCL=OFF)") : json(dev.value("nccl", "unknown (no device)"));
  const std::string rdma = command_line_output("dpkg-query -W -f='${Version}' libibverbs1");
  e["rdma_core"] = rdma.empty() ? "not installed" : rdma;
  json devs = json::array();
  if (DIR* d = opendir("/sys/class/infiniband")) {
    while (dirent* ent = readdir(d)) {
      const std::string name = ent->d_name;
      if (name[0] == '.') continue;
      const std::string base = "/sys/class/infiniband/" + name;
      devs.push_back({{"name", name}, {"node_type", read_first_line(base + "/node_type")},
                      {"port1_link_layer", read_first_line(base + "/ports/1/link_layer")},
                      {"port1_state", read_first_line(base + "/ports/1/state")},
                      {"port1_rate", read_first_line(base + "/ports/1/rate")}});
    }
    closedir(d);
  }
  e["rdma_devices"] = devs;
  json vars = json::object();
  for (char** v = environ; *v; ++v) {
    const std::string kv = *v;
    for (const char* prefix : {"OMP_", "OMPI_MCA_", "RINGBENCH_", "NCCL_", "UCX_", "CUDA_VISIBLE_DEVICES", "DNNL_", "ONEDNN_"})
      if (kv.rfind(prefix, 0) == 0)
        vars[kv.substr(0, kv.find('='))] = kv.rfind("RINGBENCH_SECRET=", 0) == 0 ? "(set; not recorded)"
                                                                                 : kv.substr(kv.find('=') + 1);
  }
  e["environment"] = vars;
  return e;
}

}  // namespace ringbench
