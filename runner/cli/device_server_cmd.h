// `ringbench device-server`: a compute device served to clients over TCP or verbs (runner/remote/),
// for `train` and `infer --device remote:HOST:PORT[,fraction=F][,transport=tcp|verbs]`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace ringbench {

struct DeviceServerArgs {
  std::string addr = "127.0.0.1";
  int port = 0;
  std::string port_file;     // the bound port is written here (for scripts)
  std::string backend = "auto";
  double memory_mib = 0;     // 0: the GPU's memory, or 16384 for the CPU standing in
  std::string policy = "best_effort";
  int max_clients = 4;
  double slice_ms = 10;
  std::string secret_file;
  double timeout_s = 30, idle_timeout_s = 600;
  int clients = 0;           // serve this many clients, then exit (0: until SIGINT or SIGTERM)
  int threads = 0;           // the CPU backend's threads (0: every core)
  double link_latency_us = 0, link_gbps = 0;  // a shaped link in front of the server (0, 0: none)
  std::string transport = "tcp";  // what the requests travel on: tcp, or verbs bootstrapped over tcp
  std::string ib_dev;             // verbs: the RDMA device ("" = the first with an ACTIVE port)
  int gid_index = -1;             // verbs: the GID table index (-1: auto)
};

void add_device_server_options(CLI::App& cmd, DeviceServerArgs& a);
int run_device_server(const DeviceServerArgs& a);

}  // namespace ringbench
