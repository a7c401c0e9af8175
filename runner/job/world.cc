#include "runner/job/world.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "collectives/auth.h"
#include "base/errors.h"
#include "collectives/net.h"
#include "runner/job/gpu.h"
#include "runner/job/launcher.h"
#include "runner/job/mpi_util.h"
#include "runner/job/slurm.h"

namespace ringbench {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name) {
  const char* v = env(name);
  char* end = nullptr;
  long x = v ? std::strtol(v, &end, 10) : -1;
  if (!v || *end || x < 0 || x > 1 << 20)
    throw Error(std::string("environment variable ") + name + "='" + (v ? v : "") +
                "' is not a valid number");
  return static_cast<int>(x);
}

std::string random_job_id() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

// The address other nodes can reach this host on: --addr, --iface, the host name's IPv4
// address when it is not loopback, else loopback (single-node runs).
std::string reachable_address(const WorldOptions& o) {
  if (!o.addr.empty()) return o.addr;
  if (!o.iface.empty()) return net::iface_ipv4(o.iface);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  std::string ip = "127.0.0.1";
  if (getaddrinfo(host, nullptr, &hints, &res) == 0) {
    for (addrinfo* it = res; it; it = it->ai_next) {
      char buf[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ai_addr)->sin_addr, buf, sizeof buf);
      if (std::strncmp(buf, "127.", 4) != 0) {
        ip = buf;
        break;
      }
    }
    freeaddrinfo(res);
  }
  return ip;
}

// Without a secret every MAC is keyed by the empty string, which anyone can compute: only
// loopback keeps strangers out, so a rank without one listens nowhere else. `option` names where
// the address came from ("--addr 0.0.0.0").
void check_loopback_without_secret(const std::string& ip, const std::string& option) {
  if (net::is_loopback_host(ip)) return;
  throw Error(option + ": without a secret every listener must be on loopback (" + ip + " is not); set "
              "RINGBENCH_SECRET or --secret-file, the same on every rank of the job, or use --addr 127.0.0.1");
}

// The addresses a rank started by hand without a secret would listen on: the store's (when it
// serves it), its transport's and its migration's (--addr, else --iface, else `default_addr`).
void check_listeners_without_secret(const WorldOptions& o) {
  if (!o.addr.empty()) check_loopback_without_secret(o.addr, "--addr " + o.addr);
  else if (!o.iface.empty()) check_loopback_without_secret(net::iface_ipv4(o.iface), "--iface " + o.iface);
}

// Rank and size from MPI; rank 0 hosts the store and broadcasts its address and the job id.
void setup_mpirun_world(World& w, const WorldOptions& o) {
  w.launcher = "mpirun";
  w.rank = mpi::rank();
  w.size = mpi::size();
  std::string rendezvous;
  if (w.rank == 0) {
    // The store listens only on the address the other ranks reach (never 0.0.0.0 unless
    // --addr 0.0.0.0 asks for it), and serves only ranks that know the secret.
    const std::string ip = reachable_address(o);
    w.secret = auth::new_secret();
    w.server = std::make_unique<TcpStoreServer>(ip, 0, w.secret);
    rendezvous = ip + ":" + std::to_string(w.server->port()) + " " + random_job_id() + " " + auth::to_hex(w.secret);
  }
  mpi::broadcast(rendezvous, 0);  // MPI's own channel: the secret never crosses our sockets
  std::istringstream in(rendezvous);
  std::string address, secret_hex;
  in >> address >> w.job_id >> secret_hex;
  w.secret = auth::secret_from_hex(secret_hex, "the job's secret from rank 0");
  auto [host, port] = parse_host_port(address);
  auto store = std::make_unique<TcpStore>(host, port, o.timeout, w.secret);
  w.default_addr = store->local_address();
  w.store = std::move(store);
}

}  // namespace

World::~World() {
  store.reset();
  if (server) server->linger(linger);
  server.reset();
  if (mpi) mpi::finalize();
}

bool launched_by_mpirun() {
  return env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK") || env("PMI_RANK");
}

bool launched_by_env() { return env("RINGBENCH_RANK") != nullptr; }

int world_size_from_env() {
  for (const char* name : {"RINGBENCH_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char* v = env(name);
    if (!v) continue;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    return *end || x < 1 || x > 1 << 20 ? 0 : static_cast<int>(x);
  }
  return 0;
}

bool writes_results() {
  for (const char* v : {"RINGBENCH_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* r = env(v)) return std::string(r) == "0";
  return true;
}

std::unique_ptr<World> make_world(const WorldOptions& o, bool need_mpi) {
  auto w = std::make_unique<World>();
  w->linger = std::min(w->linger, o.timeout);
  if (launched_by_mpirun() && !launched_by_env()) {
    if (!mpi::built_with_mpi())
      throw Error("launched by mpirun, but this ringbench was built without MPI: rebuild with "
                  "-DRINGBENCH_WITH_MPI=ON, or run without mpirun using --ranks N");
    mpi::init();
    w->mpi = true;
    try {
      setup_mpirun_world(*w, o);
    } catch (const std::exception& e) {
      // The other ranks may sit in MPI_Bcast, which has no timeout: end the whole job.
      std::cerr << "[rank " << w->rank << "] ringbench: " << e.what() << std::endl;
      mpi::abort(1);
    }
    return w;
  }
  if (need_mpi)
    throw Error("--impl mpi needs MPI: launch with mpirun (e.g. mpirun -np 4 ringbench "
                "allreduce --impl mpi)");
  std::optional<SlurmRankEnv> slurm;  // srun's tasks: the env launcher's variables while the world is made
  if (!launched_by_env() && launched_by_slurm()) slurm.emplace();
  if (launched_by_env()) {
    w->launcher = env("RINGBENCH_LAUNCHER") ? env("RINGBENCH_LAUNCHER") : "env";
    w->rank = env_int("RINGBENCH_RANK");
    w->size = env_int("RINGBENCH_WORLD_SIZE");
    if (w->rank >= w->size || w->size < 1)
      throw Error("RINGBENCH_RANK=" + std::to_string(w->rank) + " is not below RINGBENCH_WORLD_SIZE=" +
                  std::to_string(w->size));
    const char* store_addr = env("RINGBENCH_STORE");
    if (!store_addr) throw Error("RINGBENCH_RANK is set but RINGBENCH_STORE (host:port) is not");
    auto [host, port] = parse_host_port(store_addr);
    w->secret = auth::secret_from_env_or_file(o.secret_file);
    if (w->secret.empty() && !net::is_loopback_host(host))
      throw Error("the store " + std::string(store_addr) + " is not on loopback, and this rank has no secret: set "
                  "RINGBENCH_SECRET (e.g. `openssl rand -hex 32`) or --secret-file, the same on every rank of the "
                  "job; only ranks that are all on this machine's loopback may run without one");
    if (w->secret.empty()) check_listeners_without_secret(o);
    // Ranks started by hand: rank 0 serves the store when asked to, on the store's address.
    if (w->rank == 0 && env("RINGBENCH_STORE_SERVE"))
      w->server = std::make_unique<TcpStoreServer>(host, port, w->secret);
    // Without RINGBENCH_JOB_ID, the job is named after its secret, so two jobs never mix.
    w->job_id = env("RINGBENCH_JOB_ID") ? env("RINGBENCH_JOB_ID")
                                        : "job-" + auth::to_hex(auth::mac(w->secret, "job id", host, std::to_string(port))).substr(0, 16);
    auto store = std::make_unique<TcpStore>(host, port, o.timeout, w->secret);
    w->default_addr = store->local_address();
    if (w->secret.empty()) check_loopback_without_secret(w->default_addr, "the store " + std::string(store_addr));
    w->store = std::move(store);
    return w;
  }
  w->launcher = "single";
  w->job_id = random_job_id();
  w->store = std::make_unique<InProcStore>();
  return w;
}

namespace {

// What every local rank is started with: its command line and the job's rendezvous.
struct LocalJob {
  std::vector<std::string> args, standby_args;  // the ranks' command line; a standby's (--migrate-standby)
  std::string store, job, secret_var;
};

void kill_ranks(const std::vector<pid_t>& pids) {
  for (pid_t p : pids)
    if (p > 0) kill(p, SIGKILL);
}

// Starts rank r of the job: this executable again, with the rank's environment. It dies with its
// launcher, however that ends (SIGKILL included); it stays in the launcher's process group, so
// Ctrl-C and `kill -- -PGID` reach it too.
pid_t start_rank(const LocalJob& j, int r, int ranks, bool standby = false) {
  RankLaunch rl;
  rl.exe = "/proc/self/exe";
  rl.argv = standby ? j.standby_args : j.args;
  rl.env = {"RINGBENCH_RANK=" + std::to_string(r), "RINGBENCH_WORLD_SIZE=" + std::to_string(ranks),
            "RINGBENCH_STORE=" + j.store, "RINGBENCH_JOB_ID=" + j.job, "RINGBENCH_LAUNCHER=local", j.secret_var};
  rl.own_group = false;
  return start_process(rl);
}

// What a process of the launch is called in the launcher's messages.
std::string process_name(size_t index, int ranks, int standby_rank, pid_t pid) {
  const std::string p = "(pid " + std::to_string(pid) + ")";
  if (index < size_t(ranks)) return "rank " + std::to_string(index) + " " + p;
  return "the standby of rank " + std::to_string(standby_rank) + " " + p;
}

// Reaps every process of the launch (the first `ranks` of `pids` are the ranks, a last one the
// standby of rank `standby_rank`) under the launcher's rule (job/launcher.h): the first failure's
// exit code (128 + signal for a killed process). Those still running `grace` after the first
// failure are killed, and so is a standby still running `grace` after every rank ended: a
// stopped one would hold the launcher forever.
int wait_ranks(const std::vector<pid_t>& pids, int ranks, int standby_rank, std::chrono::milliseconds grace) {
  ReapRule rule;
  rule.grace = grace;
  rule.essential = size_t(ranks);
  bool failed = false;
  const auto on_exit = [&](size_t index, int status) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 0 || failed) return;
    failed = true;
    if (WIFSIGNALED(status))
      std::cerr << "ringbench: " << process_name(index, ranks, standby_rank, pids[index]) << " was killed by signal "
                << WTERMSIG(status) << "\n";
  };
  const auto on_kill = [&](KillCause cause, const std::vector<pid_t>& running) {
    if (cause != KillCause::essential_ended) {
      std::cerr << "ringbench: killing the ranks still running " << grace.count() << " ms after the first failure\n";
      return;
    }
    for (size_t i = size_t(ranks); i < running.size(); ++i)
      if (running[i] > 0)
        std::cerr << "ringbench: killing " << process_name(i, ranks, standby_rank, running[i])
                  << ": still running " << grace.count() << " ms after every rank ended (stopped, or hung)\n";
  };
  const Reaped reaped = reap_processes(pids, rule, on_kill, on_exit);
  if (reaped.lost_errno) {
    std::cerr << "ringbench: lost track of the ranks (waitpid: " << std::strerror(reaped.lost_errno) << ")\n";
    return reaped.first_failure ? reaped.first_failure : 1;
  }
  return reaped.first_failure;
}

}  // namespace

void check_local_ranks(int ranks) {
  // Each rank is a process with its own buffers and threads on this machine's cores: beyond a
  // few hundred the launch itself fails, late and noisily.
  constexpr int kMaxLocalRanks = 256;
  if (ranks > kMaxLocalRanks)
    throw Error("--ranks " + std::to_string(ranks) + ": at most " + std::to_string(kMaxLocalRanks) +
                " ranks on one machine (this one has " + std::to_string(std::thread::hardware_concurrency()) +
                " CPUs); use mpirun across hosts for more");
}

int launch_local(int ranks, const std::vector<std::string>& args, std::chrono::milliseconds grace,
                 int standby_rank) {
  check_local_ranks(ranks);
  LocalJob j;
  int port = 0;
  const int listen_fd = net::listen_tcp("127.0.0.1", 0, &port);  // close-on-exec: the ranks do not hold it
  j.store = "127.0.0.1:" + std::to_string(port);
  j.job = random_job_id();
  const std::string secret = auth::new_secret();
  j.secret_var = secret_env(secret);
  j.args = args;
  j.standby_args = args;
  j.standby_args.push_back("--migrate-standby");
  std::vector<pid_t> pids;
  // The ranks, then the standby (rank standby_rank's second process) when there is one.
  const int processes = ranks + (standby_rank >= 0 && standby_rank < ranks);
  for (int i = 0; i < processes; ++i) {
    const bool standby = i == ranks;
    try {
      pids.push_back(start_rank(j, standby ? standby_rank : i, ranks, standby));
    } catch (...) {
      kill_ranks(pids);
      throw;
    }
  }
  std::unique_ptr<TcpStoreServer> server;
  try {
    server = std::make_unique<TcpStoreServer>(listen_fd, secret);
  } catch (...) {
    kill_ranks(pids);
    throw;
  }
  return wait_ranks(pids, ranks, standby_rank, grace);
}

std::unique_ptr<World> make_command_world(const WorldOptions& opts, bool need_mpi) {
  auto world = make_world(opts, need_mpi);
  if (opts.ranks > 1 && opts.ranks != world->size)
    throw Error("--ranks " + std::to_string(opts.ranks) + " conflicts with the " + world->launcher +
                " world of " + std::to_string(world->size) + " ranks: drop --ranks under mpirun");
  return world;
}

Bytes get_from_rank(Store& store, const std::string& key, int sender, std::chrono::milliseconds timeout) {
  try {
    return store.get(key, timeout);
  } catch (const KeyTimeoutError& e) {
    // Only the key's own wait blames the sender; a store that stopped answering is the store's
    // (rank 0's) fault, and is thrown as it is.
    throw TimeoutError(sender, "rank " + std::to_string(sender) + " did not publish " + key +
                                   ": it is stopped, dead, or has not got this far (" + e.what() + ")");
  }
}

void check_same_options(Store& store, const std::string& key, const std::string& options,
                        int rank, int n, std::chrono::milliseconds timeout, const std::string& what) {
  store.set(key + "/" + std::to_string(rank), options);
  const std::string first = get_from_rank(store, key + "/0", 0, timeout);
  for (int r = 1; r < n; ++r) {
    const std::string other = get_from_rank(store, key + "/" + std::to_string(r), r, timeout);
    if (other != first)
      throw Error("rank " + std::to_string(r) + "'s options (" + other + ") differ from rank 0's (" +
                  first + "): every rank must " + what);
  }
}

nlohmann::json get_rank_json(Store& store, const std::string& key, int sender,
                             std::chrono::milliseconds timeout, nlohmann::json::value_t type) {
  const Bytes raw = get_from_rank(store, key, sender, timeout);
  nlohmann::json v = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
  const std::string from = "store key " + key + " (from rank " + std::to_string(sender) + ")";
  if (v.is_discarded()) throw Error(from + " is not valid JSON (" + std::to_string(raw.size()) + " bytes)");
  if (v.type() != type)
    throw Error(from + " is a JSON " + v.type_name() + ", expected " + nlohmann::json(type).type_name());
  return v;
}

std::optional<int> launch_ranks_here(int ranks, const std::string& gpu_per_rank,
                                     const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                     int standby_rank) {
  if (ranks < 1) throw Error("--ranks must be >= 1");
  if (ranks == 1 || launched_by_mpirun() || launched_by_env() || launched_by_slurm()) return std::nullopt;
  if (!gpu_per_rank.empty() && ranks > gpu_count())
    throw Error(gpu_per_rank + " with --ranks " + std::to_string(ranks) + ": every rank needs a GPU of its own, "
                "and this machine has " + std::to_string(gpu_count()));
  return launch_local(ranks, argv, 2 * timeout + std::chrono::milliseconds(2000), standby_rank);
}

std::string secret_env(const std::string& secret) { return "RINGBENCH_SECRET=" + auth::to_hex(secret); }

}  // namespace ringbench
