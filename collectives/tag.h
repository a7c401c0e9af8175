// What the collectives share: the 64-bit tag that makes ranks disagreeing on an operation
// fail loudly, and the error context they add before rethrowing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <chrono>
#include <initializer_list>
#include <string>

#include "collectives/dtype.h"
#include "base/errors.h"
#include "collectives/transport.h"

namespace ringbench {

// FNV-1a over the values that every rank must agree on (count, dtype, op, ...).
uint64_t collective_tag(std::initializer_list<uint64_t> values);

// Aborts the transport (so every peer stops with the same cause) and rethrows `e` with
// `what_op` in front, keeping its type (TimeoutError, IoError or Error) and peer.
[[noreturn]] void rethrow_with_context(Transport& t, const Error& e, const std::string& what_op);

// Runs one collective: any failure aborts the transport and is rethrown with the operation's
// description (built only on failure) in front.
template <class Body, class Describe>
void run_collective(Transport& t, Body&& body, Describe&& describe) {
  try {
    body();
  } catch (const Error& e) {
    rethrow_with_context(t, e, describe());
  } catch (...) {
    t.abort("the collective failed with an unexpected exception");
    throw;
  }
}

// The longest wait on one request that moves `bytes`, or waits behind that much traffic: the
// timeout plus the bytes at kSlowestLinkBytesPerS, so that a large unsegmented message on a slow
// but live link is not taken for a dead peer (the transport still finds a dead or silent peer
// by itself, within its own timeout).
constexpr double kSlowestLinkBytesPerS = 10e6;
std::chrono::milliseconds transfer_timeout(std::chrono::milliseconds timeout, size_t bytes);

// "allreduce of 1024 x float (sum)"
std::string describe_allreduce(const char* algo, size_t count, DType dtype, ReduceOp op);

}  // namespace ringbench
