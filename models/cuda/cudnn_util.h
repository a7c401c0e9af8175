// Owned cuDNN descriptors and NCHW tensor descriptors, for the CUDA backend's .cc files.
// (cuDNN 9 marks the legacy API deprecated, but only warns when CUDNN_WARN_DEPRECATED is set.)
#pragma once

#include <cudnn.h>

#include <utility>

#include "cuda/check.h"

namespace ringbench::models::gpu {

// A cuDNN descriptor created on construction and destroyed with the owner; movable.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  Descriptor() { RB_CUDA(Create(&d_)); }
  ~Descriptor() {
    if (d_) Destroy(d_);
  }
  Descriptor(Descriptor&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  T get() const { return d_; }
  operator T() const { return d_; }  // NOLINT: passed straight to cuDNN calls

 private:
  T d_ = nullptr;
};

using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActivationDesc =
    Descriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

// A fully packed NCHW tensor descriptor (float32 unless `type` says otherwise).
inline TensorDesc nchw_desc(int n, int c, int h, int w, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  TensorDesc d;
  RB_CUDA(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type, n, c, h, w));
  return d;
}

// Scaling factors for cuDNN's "y = alpha * op(x) + beta * y" (float tensors take float factors).
inline const float kOne = 1.0f;
inline const float kZero = 0.0f;
inline const float* blend(bool accumulate) { return accumulate ? &kOne : &kZero; }

}  // namespace ringbench::models::gpu
