// The command line of every subcommand: its options, their help texts and defaults. CLI11 is
// header-only and slow to compile (seconds per file), so only options.cc, main.cc and the
// backends that add options of their own include it; the commands' headers hold plain structs.
#pragma once

#include "runner/cli/allreduce_cmd.h"
#include "runner/cli/doctor_cmd.h"
#include "runner/cli/train_cmd.h"
#include "runner/cli/vgpu_cmd.h"
#include "runner/sweep/sweep_cmd.h"

namespace CLI {
class App;
}

namespace ringbench {

void add_allreduce_options(CLI::App& cmd, AllreduceArgs& a);
void add_train_options(CLI::App& cmd, TrainArgs& a);
void add_vgpu_train_options(CLI::App& cmd, VgpuTrainArgs& a);
// `ringbench vgpu profiles|detect|share`; the one given is in a.action after parsing.
void add_vgpu_commands(CLI::App& vgpu, VgpuArgs& a);
void add_doctor_options(CLI::App& cmd, DoctorArgs& a);
void add_sweep_options(CLI::App& cmd, SweepArgs& a);

}  // namespace ringbench
