// The two kinds of error ringbench raises (as in Gloo):
//  - IoError: a peer or the network failed (dead, stopped, closed, mismatched); it names the
//    peer rank and address so every rank's message points at the culprit.
//  - Error: bad input or a violated invariant on this rank (bad options, out-of-range buffer).
// A TimeoutError is an IoError raised when a wait's deadline passes.
#pragma once

#include <stdexcept>
#include <string>

namespace ringbench {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class IoError : public Error {
 public:
  IoError(int peer_rank, const std::string& what) : Error(what), peer_(peer_rank) {}
  // Rank of the peer that failed, or -1 when no single peer is to blame.
  int peer() const { return peer_; }

 private:
  int peer_;
};

class TimeoutError : public IoError {
 public:
  using IoError::IoError;
};

// A store's wait for a key that nobody set in time: the store answered, so the fault is with the
// rank that should have set it, not with the store.
class KeyTimeoutError : public TimeoutError {
 public:
  using TimeoutError::TimeoutError;
};

// Throws Error with `msg` plus strerror(errno) when `ok` is false.
void check_errno(bool ok, const std::string& msg);

}  // namespace ringbench
