// What a migrating rank is made of, and where it lives: parameters, momentum and batch-norm
// statistics inside its (emulated) framebuffer, with the activation working set a step rewrites;
// the rest (the step count, the data cursor, the measured steps) in a small state record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/trainer.h"

namespace ringbench::migrate {

class Framebuffer;

// Byte offsets inside the framebuffer.
struct StateLayout {
  size_t param_count = 0, state_count = 0, activation_bytes = 0;
  size_t params = 0, momentum = 0, state = 0, activations = 0, end = 0;
  uint64_t signature(uint64_t framebuffer_bytes) const;
};
// Throws Error when the state does not fit `framebuffer_bytes`, naming both sizes.
StateLayout layout_state(size_t param_count, size_t state_count, size_t activation_bytes,
                         uint64_t framebuffer_bytes);

// The job writes its framebuffer after a step: its state, and the activations it rewrote
// (emulated: `activation_bytes` bytes of a pattern that differs every step, so they are
// dirty every step as a real working set is; their values are not the network's).
void write_state(Framebuffer& fb, const StateLayout& l, const models::Trainer& t, int64_t step,
                 std::vector<char>& scratch);
// The target takes the state from its copy of the framebuffer.
void restore_state(const Framebuffer& fb, const StateLayout& l, models::Trainer& t, int64_t steps_done);

struct LoopState {
  int64_t steps_done = 0;         // the next step's index, warmup included
  std::vector<uint64_t> cursor;   // BatchSource::cursor()
  std::vector<models::StepRecord> measured;
  int traced = 0;                 // measured steps already in the timeline
  int64_t begin_ns = 0;           // the measured window's start (steady clock; 0: not yet)
  double cpu_s = 0;               // CPU seconds the window has used so far, in this and earlier processes
  int64_t stun_ns = 0;            // when the source stopped (steady clock)
};
std::string encode(const LoopState& s);
// Checks everything that came over the network: an Error names what is wrong.
LoopState decode_loop_state(const std::string& bytes, int64_t total_steps, size_t buckets);

}  // namespace ringbench::migrate
