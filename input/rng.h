// A small counter-based random generator: the same numbers on every host and compiler for a
// (seed, stream), so generated images and augmentations never depend on threads or libstdc++.
#pragma once

#include <cmath>
#include <cstdint>

namespace ringbench::input {

constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(splitmix64(seed)) {}
  Rng(uint64_t seed, uint64_t stream) : state_(splitmix64(splitmix64(seed) ^ splitmix64(stream + 0x51ed27))) {}
  uint64_t next() { return splitmix64(state_++); }
  // In [0, 1).
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // In [lo, hi], both included (hi >= lo).
  int integer(int lo, int hi) { return lo + int(next() % uint64_t(int64_t(hi) - lo + 1)); }
  // Normal (Box-Muller).
  double normal() {
    const double u = uniform(1e-12, 1.0), v = uniform();
    return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
  }

 private:
  uint64_t state_;
};

}  // namespace ringbench::input
