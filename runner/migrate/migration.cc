#include "runner/migrate/migration.h"

#include <arpa/inet.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>
#include <tuple>

#include "base/bytes.h"
#include "base/errors.h"
#include "collectives/net.h"
#include "runner/job/world.h"
#include "runner/migrate/framebuffer.h"
#include "runner/migrate/source_gate.h"
#include "runner/migrate/target_process.h"
#include "runner/migrate/wire.h"

namespace ringbench::migrate {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
const std::string kStepKey = "train/migrate/step/", kOutcomeKey = "train/migrate/outcome",
                  kProgressKey = "train/migrate/progress", kDowntimeKey = "train/migrate/downtime",
                  kStandbyKey = "train/migrate/standby";
constexpr uint64_t kFillSeed = 0x6672616d65627566ull;

// The migration's outcome as the source published it (Bytes of kOutcomeKey), checked.
json parse_outcome(const Bytes& raw) {
  json o = json::parse(std::string(raw), nullptr, false);
  if (!o.is_object() || !o.contains("moved") || !o["moved"].is_boolean())
    throw Error("store key " + kOutcomeKey + " is not the migration's outcome");
  return o;
}

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }
double seconds_between(int64_t a_ns, int64_t b_ns) { return double(b_ns - a_ns) * 1e-9; }

}  // namespace

MigratePlan make_plan(const MigrateArgs& a, int ranks, int64_t warmup, int64_t total_steps, uint64_t profile_bytes,
                      size_t state_bytes) {
  MigratePlan p;
  if (a.at_step == 0) {
    if (a.standby || a.to != "local") throw Error("--migrate-to and --migrate-standby need --migrate-at");
    return p;
  }
  if (ranks < 2) throw Error("--migrate-at needs a job of at least 2 ranks: a ring to re-form");
  if (a.at_step <= warmup || a.at_step >= total_steps)
    throw Error("--migrate-at " + std::to_string(a.at_step) + " must fall after the warmup and before the last step (" +
                std::to_string(warmup + 1) + ".." + std::to_string(total_steps - 1) +
                "), so the img/s timeline shows the dip and the recovery");
  p.rank = moving_rank(a, ranks);
  if (p.rank < 1 || p.rank >= ranks)
    throw Error("--migrate-rank " + std::to_string(a.rank) + " must be 1.." + std::to_string(ranks - 1) +
                " (rank 0 writes the job's results)");
  if (a.method != "precopy" && a.method != "stopcopy")
    throw Error("--migrate-method " + a.method + " is not known: use precopy or stopcopy");
  if (!a.fault.empty() && a.fault != "target-unreachable" && a.fault != "target-killed" && a.fault != "source-killed")
    throw Error("--migrate-fault " + a.fault + " is not known: use target-unreachable, target-killed or source-killed");
  if (a.to != "local" && a.to != "standby") throw Error("--migrate-to " + a.to + " is not known: use local or standby");
  p.standby = a.to == "standby";
  if (a.standby && !p.standby) throw Error("--migrate-standby is the target of --migrate-to standby: give both");
  if (p.standby && (!a.netns.empty() || !a.cpus.empty()))
    throw Error("--migrate-netns and --migrate-cpus place a target the moving rank starts; a standby "
                "(--migrate-to standby) runs where it was started");
  if (p.standby && a.fault == "target-killed")
    throw Error("--migrate-fault target-killed kills a target the moving rank started; a standby is not its child");
  p.at_step = a.at_step;
  p.total_steps = total_steps;
  p.policy.precopy = a.method == "precopy";
  p.netns = a.netns;
  p.cpus = parse_cpu_list(a.cpus, "--migrate-cpus");
  check_cpus_allowed(p.cpus, "--migrate-cpus " + a.cpus);
  p.fault = a.fault;
  const uint64_t chunk = Framebuffer::kChunkBytes;
  p.framebuffer_bytes = !a.framebuffer.empty() ? parse_bytes(a.framebuffer)
                        : profile_bytes       ? profile_bytes
                                              : (state_bytes + chunk - 1) / chunk * chunk;
  return p;
}

Migration::Migration(const MigratePlan& plan, Role role, RankSide side, RingHooks ring, const StateLayout& layout)
    : plan_(plan), role_(role), side_(std::move(side)), ring_(std::move(ring)), layout_(layout) {
  // The VM's framebuffer exists before its migration does: allocated and written at setup.
  if (role_ == Role::source) fb_ = std::make_unique<Framebuffer>(plan_.framebuffer_bytes, kFillSeed);
}

Migration::~Migration() {
  copier_.reset();
  if (role_ == Role::source && !done_) kill_target(target_pid_);
}

double Migration::take_wait_s() { return std::exchange(wait_s_, 0.0); }

// The source at the migration's start: its framebuffer, the target's process, the copier.
void Migration::start(const models::Trainer& t) {
  started_ = true;
  start_ns_ = now_ns();
  write_state(*fb_, layout_, t, plan_.at_step, scratch_);
  std::string host, missing;  // missing: why there is no target to copy to (the copy then fails)
  int port = 0;
  if (plan_.standby) {
    try {
      std::tie(host, port) = standby_address();
    } catch (const std::exception& e) {
      missing = e.what();
    }
  } else {
    const TargetProcess target = spawn_target(plan_.netns, plan_.cpus, side_.local_addr, side_.argv);
    target_pid_ = target.pid;
    host = target.host;
    port = target.port;
  }
  target_addr_ = missing.empty() ? host + ":" + std::to_string(port) : "its standby";
  // target-unreachable: a port nothing listens on (the target's, plus one).
  if (plan_.fault == "target-unreachable") port = port < 65535 ? port + 1 : port - 1;
  const StreamShape shape{plan_.framebuffer_bytes, Framebuffer::kChunkBytes, layout_.signature(plan_.framebuffer_bytes)};
  copier_ = std::make_unique<Copier>(
      *fb_, [host, port, missing, secret = side_.secret, shape, timeout = side_.timeout] {
        if (!missing.empty()) throw Error(missing);
        return connect_target(host, port, secret, shape, timeout);
      },
      plan_.policy, side_.timeout);
}

// Where the standby listens, as it published it: an IPv4 address of this job's network (the
// transports' too) and a port, checked before anything connects there.
std::pair<std::string, int> Migration::standby_address() const {
  Bytes raw;
  try {
    raw = side_.store.get(kStandbyKey, side_.timeout);
  } catch (const KeyTimeoutError&) {
    throw Error("no standby (--migrate-standby on node B) said where it listens within " +
                std::to_string(side_.timeout.count() / 1000) + " s");
  }
  const json v = json::parse(std::string(raw), nullptr, false);
  const json host = v.is_object() ? v.value("host", json()) : json(), port = v.is_object() ? v.value("port", json()) : json();
  in_addr ip{};
  if (!host.is_string() || host.get<std::string>().size() >= INET_ADDRSTRLEN ||
      ::inet_pton(AF_INET, host.get<std::string>().c_str(), &ip) != 1 || ip.s_addr == htonl(INADDR_ANY))
    throw Error("store key " + kStandbyKey + " holds host " + host.dump().substr(0, 64) + ", not an IPv4 address");
  if (!port.is_number_integer() || port.get<int64_t>() < 1 || port.get<int64_t>() > 65535)
    throw Error("store key " + kStandbyKey + " holds port " + port.dump().substr(0, 32) + ", not 1..65535");
  return {host.get<std::string>(), int(port.get<int64_t>())};
}

// Whether the outcome, once published (within `wait`), says the rank stayed on its node; false
// when there is none yet. Thrown when it says the rank moved: not to this standby, then.
bool Migration::rank_stayed(std::chrono::milliseconds wait) {
  json o;
  try {
    o = parse_outcome(side_.store.get(kOutcomeKey, wait));
  } catch (const KeyTimeoutError&) {
    return false;
  }
  if (o["moved"].get<bool>())
    throw Error("the migration's outcome says rank " + std::to_string(plan_.rank) + " moved, but not to this standby");
  return true;
}

// The connection from the rank's source, whoever else connects meanwhile (source_gate.h): the
// strangers are refused, counted into refused_ and said on stderr (the first few). A target
// waits as long as its source's start allows; a standby (it listens for the whole run before
// the migration) until its source comes or the outcome says the rank stayed (-1). Nothing else
// ends a standby's wait but the job's: the store it polls is the job's, and its error ends it.
int Migration::accept_from_source(int listen_fd, const StreamShape& shape) {
  const std::string role = plan_.standby ? "standby" : "migration target";
  constexpr int kSaid = 10;
  auto say = [this, role, said = 0](const std::string& why) mutable {
    if (++said <= kSaid)
      std::fprintf(stderr, "[rank %d %s] refused: %s%s\n", side_.rank, role.c_str(), why.c_str(),
                   said == kSaid ? " (further refusals are counted, not said)" : "");
  };
  SourceGate gate(listen_fd, side_.secret, shape, side_.timeout, say);
  auto source_not_needed = [this] { return rank_stayed(std::chrono::milliseconds(1)); };  // the store every second
  try {
    const int fd = plan_.standby ? gate.accept(Clock::time_point::max(), [&] { return !source_not_needed(); })
                                 : gate.accept(Clock::now() + 2 * side_.timeout);
    refused_ = gate.refusals();
    return fd;
  } catch (...) {
    refused_ = gate.refusals();
    throw;
  }
}

void Migration::after_step(int64_t s, const models::Trainer& t) {
  if (role_ == Role::source && started_ && !done_) write_state(*fb_, layout_, t, s + 1, scratch_);
}

Migration::Next Migration::before_step(int64_t s, models::Trainer& t, const LoopState& loop) {
  if (done_ || s < plan_.at_step || role_ == Role::target) return Next::train;
  const std::string key = kStepKey + std::to_string(s);
  if (role_ == Role::other) {
    const std::string d = std::string(get_from_rank(side_.store, key, plan_.rank, 2 * side_.timeout));
    if (d == "go") return Next::train;
    if (d != "stun") throw Error("store key " + key + " holds '" + d.substr(0, 16) + "', not go or stun");
    const auto t0 = Clock::now();
    t.connect({});
    ring_.drop();
    wait_outcome();
    ring_.form(1);
    stall_s_ = wait_s_ = std::chrono::duration<double>(Clock::now() - t0).count();
    done_ = true;
    return Next::train;
  }
  if (!started_) start(t);
  // The run's last step stuns whatever the copy's state: the rank must move before the job ends.
  forced_ = !copier_->ready_to_stun() && s + 1 >= plan_.total_steps;
  const bool stun_now = copier_->ready_to_stun() || forced_;
  side_.store.set(key, stun_now ? "stun" : "go");
  if (!stun_now) return Next::train;
  t.connect({});
  ring_.drop();
  return stun(loop);
}

// The source, stunned before step s: the rest of the framebuffer and the loop's state go to the
// target; once it has stored them the rank lives there. A failure resumes the rank here.
Migration::Next Migration::stun(const LoopState& loop) {
  stun_ns_ = now_ns();
  LoopState moving = loop;
  moving.stun_ns = stun_ns_;
  std::string error;
  try {
    if (plan_.fault == "target-killed") kill_target(target_pid_);
    if (plan_.fault == "source-killed") ::raise(SIGKILL);  // stunned, and never coming back
    uint64_t reported = 0;
    copier_->finish(encode(moving), [&](uint64_t sent) {
      side_.store.add(kProgressKey, int64_t(sent - reported));
      reported = sent;
    });
    stored_ns_ = now_ns();
  } catch (const std::exception& e) {
    error = e.what();
  }
  done_ = true;
  outcome_ = source_report(error);
  side_.store.set(kOutcomeKey, outcome_.dump());
  // fb_ stays until this process ends (after its target's): freeing gigabytes now would compete
  // with the new ring's forming for this host's cores, a cost a source on another host never adds.
  if (error.empty()) return Next::leave;
  std::fprintf(stderr, "[rank %d] ringbench train: the migration to %s failed (%s): resuming on this node\n",
               side_.rank, target_addr_.c_str(), error.c_str());
  kill_target(target_pid_);
  target_pid_ = -1;
  ring_.form(1);
  wait_s_ = seconds_between(stun_ns_, now_ns());
  return Next::train;
}

json Migration::source_report(const std::string& error) const {
  json rounds = json::array();
  uint64_t precopied = 0, stunned = 0;
  int precopy_rounds = 0;
  for (const Round& r : copier_->rounds()) {
    precopy_rounds += !r.stunned;
    rounds.push_back({{"round", r.round}, {"stunned", r.stunned}, {"bytes", r.bytes}, {"seconds", r.seconds},
                      {"dirty_after", r.dirty_after}});
    (r.stunned ? stunned : precopied) += r.bytes;
  }
  json j = {{"moved", error.empty()}, {"rank", plan_.rank}, {"method", plan_.method()}, {"to", target_addr_},
            {"netns", plan_.netns}, {"standby", plan_.standby}, {"framebuffer_bytes", plan_.framebuffer_bytes}, {"state_bytes", layout_.end},
            {"activation_bytes", layout_.activation_bytes}, {"chunk_bytes", Framebuffer::kChunkBytes},
            {"rounds", rounds}, {"precopy_rounds", precopy_rounds}, {"forced_at_last_step", forced_}, {"precopy_bytes", precopied}, {"stun_bytes", stunned},
            {"start_ns", start_ns_}, {"stun_ns", stun_ns_}, {"copy_end_ns", stored_ns_},
            {"precopy_s", seconds_between(start_ns_, stun_ns_)},
            {"stun_copy_s", stored_ns_ ? seconds_between(stun_ns_, stored_ns_) : 0.0}};
  if (!error.empty()) j["error"] = error;
  return j;
}

// The other ranks, while the rank is stunned: the source's outcome, as long as its copy makes
// progress; silence for the peer timeout is the migrating rank's death.
void Migration::wait_outcome() {
  int64_t progress = -1;
  auto last_change = Clock::now();
  for (;;) {
    try {
      outcome_ = parse_outcome(side_.store.get(kOutcomeKey, std::chrono::milliseconds(500)));
      return;
    } catch (const KeyTimeoutError&) {
    }
    const int64_t p = side_.store.add(kProgressKey, 0);
    if (p != progress) progress = p, last_change = Clock::now();
    if (Clock::now() - last_change > 2 * side_.timeout)
      throw TimeoutError(plan_.rank, "rank " + std::to_string(plan_.rank) + " stopped for its migration and made no progress for " +
                                         std::to_string(2 * side_.timeout.count() / 1000) + " s (" +
                                         std::to_string(progress) + " bytes sent): it is stopped or dead");
  }
}

std::optional<LoopState> Migration::arrive(models::Trainer& t, models::BatchSource& data, int64_t total_steps,
                                          size_t buckets) {
  struct Sockets {  // closed however the arrival ends
    int listen, stream = -1;
    ~Sockets() {
      net::close_fd(stream);
      net::close_fd(listen);
    }
  } fds{target_listen_fd()};
  // A standby's framebuffer is ready before it says where it listens, as a destination host's is.
  fb_ = std::make_unique<Framebuffer>(plan_.framebuffer_bytes, 0);
  const StreamShape shape{plan_.framebuffer_bytes, Framebuffer::kChunkBytes, layout_.signature(plan_.framebuffer_bytes)};
  if (fds.listen < 0) {  // a standby: listens on its rank's address and says where (a target's source knows)
    int port = 0;
    fds.listen = net::listen_tcp(side_.local_addr, 0, &port);
    side_.store.set(kStandbyKey, json{{"host", side_.local_addr}, {"port", port}}.dump());
  }
  fds.stream = accept_from_source(fds.listen, shape);
  net::close_fd(fds.listen);  // from now on the kernel refuses strangers: none is accepted in the stun
  if (fds.stream < 0) return std::nullopt;
  uint64_t received = 0;
  LoopState loop;
  try {
    loop = decode_loop_state(receive_stream(fds.stream, *fb_, side_.timeout, &received), total_steps, buckets);
  } catch (const std::exception&) {
    // A source that gave up half way resumes the rank on its node: then a standby just leaves (a
    // target it started is killed by it).
    if (plan_.standby && rank_stayed(2 * side_.timeout)) return std::nullopt;
    throw;
  }
  restore_state(*fb_, layout_, t, loop.steps_done);
  data.restore(loop.cursor);
  send_stored(fds.stream, side_.timeout);
  // fb_ stays: it is the rank's device memory on its new node, as long-lived as the rank. Freeing
  // it here (munmap of the whole framebuffer, ~0.3 s for 8 GiB) put a size-proportional cost
  // into the stun that no real target pays.
  ring_.form(1);
  done_ = true;
  const int64_t resumed = now_ns();
  wait_s_ = seconds_between(loop.stun_ns, resumed);
  // Strangers refused after the stun began (its copy waited on a handshake: a forced stun) overlap it.
  side_.store.set(kDowntimeKey, json{{"downtime_s", wait_s_},
                                     {"resumed_ns", resumed},
                                     {"cpus", affinity()},
                                     {"refused_connections", refused_.count},
                                     {"refused_during_stun", refused_.any_since(loop.stun_ns)}}
                                    .dump());
  return loop;
}

void trace_migration(const json& r, models::Timeline& tl) {
  constexpr int kTrack = 3;
  auto at = [&](const char* key) { return Clock::time_point(std::chrono::nanoseconds(r.value(key, int64_t(0)))); };
  const std::string who = "rank " + std::to_string(r.value("rank", -1));
  tl.name_track(kTrack, "migration of " + who + " (" + r.value("method", std::string()) + ")");
  const double mib = 1 << 20;
  char text[160];
  std::snprintf(text, sizeof text, "pre-copy: %d round(s), %.0f MiB", r.value("precopy_rounds", 0),
                r.value("precopy_bytes", 0.0) / mib);
  tl.add(kTrack, text, "migration", at("start_ns"), at("stun_ns"));
  if (!r.value("moved", false)) {
    tl.add(kTrack, "failed: " + r.value("error", std::string()) + "; resumed on its node", "migration", at("stun_ns"),
           at("stun_ns") + std::chrono::milliseconds(1));
    return;
  }
  std::snprintf(text, sizeof text, "stun: copy %.0f MiB", r.value("stun_bytes", 0.0) / mib);
  tl.add(kTrack, text, "migration", at("stun_ns"), at("copy_end_ns"));
  tl.add(kTrack, "resume on the new node: ring re-formed", "migration", at("copy_end_ns"), at("resumed_ns"));
}

// A standby is not this process's child: whoever started it waits for it.
int Migration::wait_for_target() {
  const pid_t pid = std::exchange(target_pid_, -1);
  return pid > 0 ? wait_target(pid) : 0;
}

json Migration::result(std::chrono::milliseconds timeout) const {
  if (outcome_.is_null()) return json();
  json j = outcome_;
  j["ring_stall_s"] = stall_s_;
  if (j.value("moved", false)) {
    const json d = get_rank_json(side_.store, kDowntimeKey, plan_.rank, timeout);
    const json& down = d.at("downtime_s");
    if (!down.is_number() || !(down.get<double>() >= 0)) throw Error("store key " + kDowntimeKey + " holds " + down.dump());
    j["stun_s"] = down;
    j["resumed_ns"] = d.value("resumed_ns", int64_t(0));
    j["target_cpus"] = checked_cpu_list(d.value("cpus", json::array()), kDowntimeKey);
    const json refused = d.value("refused_connections", json(0)), in_stun = d.value("refused_during_stun", json(false));
    if (!refused.is_number_integer() || refused.get<int64_t>() < 0 || !in_stun.is_boolean())
      throw Error("store key " + kDowntimeKey + " holds refused connections " + refused.dump().substr(0, 32) + ", " +
                  in_stun.dump().substr(0, 16) + ": not a count and a yes or no");
    j["refused_connections"] = refused;
    j["refused_during_stun"] = in_stun;
    j["total_s"] = seconds_between(j.value("start_ns", int64_t(0)), j["resumed_ns"].get<int64_t>());
  }
  return j;
}

}  // namespace ringbench::migrate
