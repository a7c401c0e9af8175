// Helpers shared by store.cc (InProcStore, store_barrier) and the TCP store (store_server.cc,
// store_client.cc). Internal to the collectives library: not part of its interface.
#pragma once

#include <cstdint>
#include <string>

#include "collectives/store.h"

namespace ringbench::store_detail {

// Connections at most that wait at once to prove they know the secret (TcpStoreServer): a new
// one drops the oldest of them, counted in TcpStoreServer::rejected().
inline constexpr int kMaxStrangers = 64;

// "0.2", "30", "1.5": seconds, for error messages.
std::string seconds_text(Millis ms);

// Deadlines far in the future overflow steady_clock arithmetic; a year is "forever" here.
Millis clamp_timeout(Millis timeout);

// Parses a whole decimal string (a store counter); false when it is not exactly an int64.
bool parse_int64(const std::string& s, int64_t& out);

// The message of the TimeoutError of a get() that waited `timeout` for `key` in `store`.
std::string key_timeout_text(const std::string& key, Millis timeout, const std::string& store);

}  // namespace ringbench::store_detail
