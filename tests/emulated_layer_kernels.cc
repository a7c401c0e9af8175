// The CUDA backend's own kernels (models/cuda/layer_kernels.cu, sgd_kernels.cu), compiled for the host and run
// on emulated blocks of threads (cuda/emulation.h), so that CI without a GPU tests them.
// (the target defines RINGBENCH_CUDA_EMULATION)
#include "models/cuda/bn_act_kernels.cu"
#include "models/cuda/layer_kernels.cu"
#include "models/cuda/sgd_kernels.cu"
