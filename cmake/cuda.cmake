# The CUDA backend's toolchain and libraries. Included when RINGBENCH_WITH_CUDA=ON; defines
# CUDA::cudart and CUDA::cublas (FindCUDAToolkit), cudnn::cudnn and, with RINGBENCH_WITH_NCCL,
# nccl::nccl, and sets RINGBENCH_HAVE_CUDA / RINGBENCH_HAVE_NCCL.
#
# Architectures: `native` needs a GPU at configure time, so the default is explicit (A100 and
# H100); override with -DCMAKE_CUDA_ARCHITECTURES=75 (T4) or similar. nvcc 13 rejects sm_70.
# cuDNN and NCCL may be a wheel-style install (versioned names only, libcudnn.so.9) under the
# toolkit, or Python wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13): point CUDNN_ROOT / NCCL_ROOT
# at the wheel's nvidia/cudnn or nvidia/nccl folder.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to build for")
endif()
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "RINGBENCH_WITH_CUDA=ON but no CUDA compiler (nvcc) was found: install the "
                      "CUDA toolkit, set CUDACXX=/path/to/nvcc, or configure with "
                      "-DRINGBENCH_WITH_CUDA=OFF")
endif()
enable_language(CUDA)
# One CUDA runtime in the process: the shared libcudart that CUDA::cudart (cuBLAS, cuDNN, NCCL)
# uses. nvcc's default, the static one, would give .cu objects a second runtime whose streams,
# events and kernels the first cannot see.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
# CMake before 3.26 does not know that nvcc 12+ takes -std=c++20.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND
   CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)

set(CUDNN_ROOT "$ENV{CUDNN_ROOT}" CACHE PATH "cuDNN install (include/, lib/) if not in the toolkit")
find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
             HINTS ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
  message(FATAL_ERROR "RINGBENCH_WITH_CUDA=ON but cuDNN 9 was not found (cudnn.h: "
                      "${CUDNN_INCLUDE_DIR}, libcudnn: ${CUDNN_LIBRARY}): set CUDNN_ROOT")
endif()
add_library(cudnn::cudnn UNKNOWN IMPORTED)
set_target_properties(cudnn::cudnn PROPERTIES IMPORTED_LOCATION ${CUDNN_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
set(RINGBENCH_HAVE_CUDA 1)

if(RINGBENCH_WITH_NCCL)
  set(NCCL_ROOT "$ENV{NCCL_ROOT}" CACHE PATH "NCCL install (include/, lib/) if not in the toolkit")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
               HINTS ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    message(FATAL_ERROR "RINGBENCH_WITH_NCCL=ON but NCCL 2 was not found (nccl.h: "
                        "${NCCL_INCLUDE_DIR}, libnccl: ${NCCL_LIBRARY}): set NCCL_ROOT")
  endif()
  add_library(nccl::nccl UNKNOWN IMPORTED)
  set_target_properties(nccl::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
  set(RINGBENCH_HAVE_NCCL 1)
endif()
message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
               "${CMAKE_CUDA_ARCHITECTURES}, cuDNN ${CUDNN_LIBRARY}, NCCL ${NCCL_LIBRARY}")
