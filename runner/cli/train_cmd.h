// `ringbench train`: data-parallel training of one model across the ranks, reporting Horovod's
// figures (img/sec per rank with a 95% confidence interval, total img/sec summed over ranks)
// and where each step's time goes: compute, allreduce, and the communication left exposed.
#pragma once

#include <string>
#include <vector>

#include "runner/cli/vgpu_cmd.h"
#include "runner/record/train_args.h"

namespace ringbench {

int run_train(const TrainArgs& a, const std::vector<std::string>& argv);

}  // namespace ringbench
