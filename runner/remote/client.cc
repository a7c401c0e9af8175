#include "runner/remote/client.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "base/errors.h"
#include "collectives/auth.h"
#include "collectives/net.h"
#include "runner/remote/verbs_link.h"

namespace ringbench::remote {

std::string DeviceSpec::text() const { return host + ":" + std::to_string(port); }

bool is_remote_device(const std::string& device) { return device.rfind("remote:", 0) == 0; }

DeviceSpec parse_device_spec(const std::string& device, const std::string& option) {
  const std::string what = option + " " + device.substr(0, 80);
  if (!is_remote_device(device)) throw Error(what + ": not remote:HOST:PORT[,fraction=F][,transport=tcp|verbs]");
  std::string rest = device.substr(7), opts;
  if (const auto comma = rest.find(','); comma != std::string::npos) {
    opts = rest.substr(comma + 1);
    rest = rest.substr(0, comma);
  }
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) throw Error(what + ": no HOST:PORT after remote:");
  DeviceSpec s;
  s.host = rest.substr(0, colon);
  const std::string port = rest.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p < 1 || p > 65535) throw Error(what + ": the port must be 1-65535");
  s.port = int(p);
  while (!opts.empty()) {
    const auto comma = opts.find(',');
    const std::string opt = opts.substr(0, comma);
    opts = comma == std::string::npos ? "" : opts.substr(comma + 1);
    if (opt.rfind("fraction=", 0) == 0) {
      const std::string f = opt.substr(9);
      s.fraction = std::strtod(f.c_str(), &end);
      if (f.empty() || *end || !(s.fraction > 0 && s.fraction <= 1)) throw Error(what + ": fraction must be in (0, 1]");
    } else if (opt.rfind("transport=", 0) == 0) {
      const auto t = parse_transport(opt.substr(10));
      if (!t) throw Error(what + ": transport must be tcp or verbs");
      s.transport = *t;
    } else {
      throw Error(what + ": the options are fraction=F and transport=tcp|verbs");
    }
  }
  return s;
}

std::string device_secret(const std::string& secret_file) {
  if (const char* v = std::getenv("RINGBENCH_DEVICE_SECRET"); v && *v)
    return auth::secret_from_hex(v, "RINGBENCH_DEVICE_SECRET");
  std::string s = auth::secret_from_env_or_file(secret_file);
  if (s.empty())
    throw Error("--device remote: needs the device server's secret: set RINGBENCH_SECRET or --secret-file (the "
                "server's)");
  return s;
}

void pass_device_secret(const std::string& secret_file) {
  if (const char* v = std::getenv("RINGBENCH_DEVICE_SECRET"); v && *v) return;
  const std::string s = auth::secret_from_env_or_file(secret_file);
  if (!s.empty()) ::setenv("RINGBENCH_DEVICE_SECRET", auth::to_hex(s).c_str(), 1);
}

std::string bytes_text(uint64_t bytes) {
  char b[32];
  if (bytes >= 100000) std::snprintf(b, sizeof b, "%.1f MB", double(bytes) / 1e6);
  else if (bytes >= 1000) std::snprintf(b, sizeof b, "%.1f kB", double(bytes) / 1e3);
  else std::snprintf(b, sizeof b, "%llu B", (unsigned long long)bytes);
  return b;
}

nlohmann::json Traffic::to_json() const {
  return {{"sent_bytes", sent}, {"received_bytes", received}, {"round_trips", round_trips}};
}

RemoteDevice::RemoteDevice(const DeviceSpec& spec, const std::string& secret, std::chrono::milliseconds timeout)
    : spec_(spec), timeout_(timeout) {
  if (spec.transport == LinkTransport::verbs)  // before connecting: what is missing here is no fault of the server
    if (const std::string why = verbs_link_unavailable(); !why.empty())
      throw Error("--device remote:" + spec.text() + ",transport=verbs: " + why);
  const auto deadline = net::Clock::now() + timeout;
  std::string why = "timed out";
  int fd = -1;
  for (auto backoff = std::chrono::milliseconds(10);; backoff = std::min(backoff * 2, std::chrono::milliseconds(500))) {
    fd = net::try_connect(spec.host, spec.port, deadline, &why);
    if (fd >= 0 || net::Clock::now() >= deadline) break;
    std::this_thread::sleep_for(backoff);
  }
  if (fd < 0) throw TimeoutError(-1, "device server " + spec.text() + ": cannot connect: " + why);
  net::set_nodelay(fd);
  tcp_ = std::make_unique<SocketChannel>(fd, "device server " + spec.text());
  c_ = tcp_.get();
  handshake(fd, secret);
  choose_transport(fd);
  std::string hello, answer;
  double fraction = spec.fraction;
  uint64_t bits = 0;
  std::memcpy(&bits, &fraction, sizeof bits);
  put_u64(hello, bits);
  call(Op::hello, 0, hello, nullptr, 0, {.out = &answer});
  device_ = parse_device_description(answer, "device server " + spec.text());
}

nlohmann::json parse_device_description(const std::string& answer, const std::string& who) {
  nlohmann::json d = nlohmann::json::parse(answer, nullptr, false);
  if (!d.is_object() || !d.contains("emulated") || !d["emulated"].is_boolean())
    throw IoError(-1, who + ": its hello answer is not a device description");
  return d;
}

void RemoteDevice::handshake(int fd, const std::string& secret) {
  const std::string who = "device server " + spec_.text();
  const auto deadline = net::Clock::now() + timeout_;
  std::string challenge(8 + auth::kNonceBytes, '\0');
  int err = 0;
  if (net::recv_all(fd, challenge.data(), challenge.size(), deadline, &err) != net::IoStatus::ok ||
      challenge.compare(0, 8, kMagic, 8) != 0)
    throw IoError(-1, who + " did not greet as a device server");
  const std::string server_nonce = challenge.substr(8), nonce = auth::random_bytes(auth::kNonceBytes);
  const std::string hello = std::string(kMagic, 8) + nonce + auth::mac(secret, kClientPurpose, server_nonce, nonce);
  std::string answer(auth::kMacBytes, '\0');
  if (net::send_all(fd, hello.data(), hello.size(), deadline, &err) != net::IoStatus::ok ||
      net::recv_all(fd, answer.data(), answer.size(), deadline, &err) != net::IoStatus::ok)
    throw IoError(-1, who + " closed the connection at the handshake: it has another secret");
  if (!auth::same_mac(answer, auth::mac(secret, kServerPurpose, nonce, server_nonce)))
    throw IoError(-1, who + " does not know the job's secret");
  traffic_.sent += hello.size();
  traffic_.received += challenge.size() + answer.size();
}

void RemoteDevice::choose_transport(int fd) {
  const std::string who = "device server " + spec_.text();
  const std::string choice = encode_link_choice(spec_.transport);
  tcp_->write(choice.data(), choice.size(), timeout_);
  traffic_.sent += choice.size();
  std::string answer;
  uint64_t received = 0;
  receive_reply(*tcp_, timeout_, who, Op::hello, {.out = &answer}, &received);  // 'E' throws the server's why
  traffic_.received += received;
  if (spec_.transport == LinkTransport::verbs) {
    verbs_ = open_verbs_channel(fd, who, false, timeout_, {});
    c_ = verbs_.get();
  }
}

nlohmann::json RemoteDevice::link() const {
  const std::string local = net::local_address(tcp_->fd());
  const std::string ip = local.substr(0, local.rfind(':'));
  const std::string iface = net::iface_of_ipv4(ip);
  nlohmann::json j = {{"transport", transport_name(spec_.transport)}, {"server", spec_.text()}, {"local", local},
                      {"peer", net::peer_address(tcp_->fd())}, {"interface", iface},
                      {"interface_gbps", iface.empty() ? 0.0 : net::iface_speed_gbps(iface)}};
  if (verbs_) {
    j["verbs"] = verbs_->path();  // device, provider, port, GID, MTU ...: the RDMA path the requests took
    j["bootstrap"] = "tcp: the HMAC handshake and the queue pairs' addresses, on local/peer above";
  }
  return j;
}

std::string RemoteDevice::link_text() const {
  if (!verbs_) return "tcp";
  const auto p = verbs_->path();
  auto at = [&](const char* k) { return p.count(k) ? p.at(k) : std::string("?"); };
  return "verbs (" + at("device") + " port " + at("port") + ", " + at("gid_type") + " GID " + at("gid") + ", MTU " +
         at("active_mtu") + "; bootstrapped over tcp)";
}

Traffic RemoteDevice::traffic() const {
  std::lock_guard lock(m_);
  return traffic_;
}

void RemoteDevice::call(Op op, uint32_t handle, const std::string& head, const void* data, uint64_t len,
                        const ReplyTo& to) {
  std::lock_guard lock(m_);
  char h[kHeaderBytes];
  encode_request(h, {op, handle, head.size() + len});
  c_->write(h, sizeof h, timeout_);
  c_->write(head.data(), head.size(), timeout_);
  if (len) c_->write(data, len, timeout_);
  c_->flush(timeout_);
  traffic_.sent += sizeof h + head.size() + len;
  ++traffic_.round_trips;
  receive_reply(*c_, timeout_, "device server " + spec_.text(), op, to, &traffic_.received);
}

void receive_reply(Channel& c, Millis timeout, const std::string& who, Op op, const ReplyTo& to, uint64_t* received) {
  auto recv = [&](void* p, uint64_t n) {
    c.read(p, n, timeout);
    *received += n;
  };
  std::set<uint32_t> chunked;  // the nodes whose gradients came
  for (;;) {
    std::string why;
    char h[kHeaderBytes];
    recv(h, sizeof h);
    const auto r = decode_reply(h, &why);
    if (!r) throw IoError(-1, who + ": " + why);
    if (r->kind == 'E') {
      if (r->length > 4096) throw IoError(-1, who + ": an error message of " + std::to_string(r->length) + " bytes");
      std::string msg(r->length, '\0');
      recv(msg.data(), msg.size());
      throw Error(who + ": " + std::string(op_name(op)) + ": " + msg);
    }
    if (r->kind == 'P') {
      char ch[kGradChunkBytes];
      if (!to.chunks || r->length < sizeof ch) throw IoError(-1, who + ": gradients nobody asked for");
      recv(ch, sizeof ch);
      const GradChunk g = decode_grad_chunk(ch);
      if (chunked.size() >= to.chunks->max_chunks || !chunked.insert(g.node).second)
        throw IoError(-1, who + ": node " + std::to_string(g.node) + "'s gradients again, or more chunks than the " +
                              std::to_string(to.chunks->max_chunks) + " nodes with parameters");
      float* dst = to.chunks->where(g);  // throws on a range that is not the node's
      if (r->length - sizeof ch != g.count * 4) throw IoError(-1, who + ": a gradient chunk of the wrong length");
      recv(dst, g.count * 4);
      to.chunks->done(g);
      continue;
    }
    if (to.out) {
      if (r->length > (uint64_t{1} << 20)) throw IoError(-1, who + ": a reply of " + std::to_string(r->length) + " bytes");
      to.out->resize(r->length);
      recv(to.out->data(), r->length);
    } else if (r->length != to.into_len) {
      throw IoError(-1, who + ": " + op_name(op) + " answered " + std::to_string(r->length) + " bytes, not " +
                            std::to_string(to.into_len));
    } else if (r->length) {
      recv(to.into, r->length);
    }
    return;
  }
}

}  // namespace ringbench::remote
