# The CUDA backend's toolchain and libraries. Included when RINGBENCH_WITH_CUDA=ON; defines
# CUDA::cudart and CUDA::cublas (FindCUDAToolkit), cudnn::cudnn and, with RINGBENCH_WITH_NCCL,
# nccl::nccl, and sets RINGBENCH_HAVE_CUDA / RINGBENCH_HAVE_NCCL.
#
# Architectures: `native` needs a GPU at configure time, so the default is explicit (A100 and
# H100, and T4 for the vGPU profiles of the catalog); override with -DCMAKE_CUDA_ARCHITECTURES=90
# for one target or similar. nvcc 13 rejects sm_70.
# cuDNN and NCCL may be a wheel-style install (versioned names only, libcudnn.so.9) under the
# toolkit, or Python wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13): point CUDNN_ROOT / NCCL_ROOT
# at the wheel's nvidia/cudnn or nvidia/nccl folder.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "75;80;90" CACHE STRING "CUDA architectures to build for")
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

# A library that may be installed apart from the toolkit (cuDNN, NCCL), as the imported target
# <name>::<name>: its header and lib<name> (or `soname`) under ${<PREFIX>_ROOT} (a cache path,
# from the environment) or in the toolkit's directories, found into the cache variables
# <PREFIX>_INCLUDE_DIR and <PREFIX>_LIBRARY. Missing: a fatal error that says `option` asked for
# it (`what`: its name and major version).
function(ringbench_find_cuda_library name prefix header soname option what)
  set(${prefix}_ROOT "$ENV{${prefix}_ROOT}" CACHE PATH "${what} install (include/, lib/) if not in the toolkit")
  find_path(${prefix}_INCLUDE_DIR ${header} HINTS ${${prefix}_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(${prefix}_LIBRARY NAMES ${name} ${soname}
               HINTS ${${prefix}_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
  if(NOT ${prefix}_INCLUDE_DIR OR NOT ${prefix}_LIBRARY)
    message(FATAL_ERROR "${option}=ON but ${what} was not found (${header}: "
                        "${${prefix}_INCLUDE_DIR}, lib${name}: ${${prefix}_LIBRARY}): set ${prefix}_ROOT")
  endif()
  add_library(${name}::${name} UNKNOWN IMPORTED)
  set_target_properties(${name}::${name} PROPERTIES IMPORTED_LOCATION ${${prefix}_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${${prefix}_INCLUDE_DIR})
endfunction()

ringbench_find_cuda_library(cudnn CUDNN cudnn.h libcudnn.so.9 RINGBENCH_WITH_CUDA "cuDNN 9")
set(RINGBENCH_HAVE_CUDA 1)

if(RINGBENCH_WITH_NCCL)
  ringbench_find_cuda_library(nccl NCCL nccl.h libnccl.so.2 RINGBENCH_WITH_NCCL "NCCL 2")
  set(RINGBENCH_HAVE_NCCL 1)
endif()
message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
               "${CMAKE_CUDA_ARCHITECTURES}, cuDNN ${CUDNN_LIBRARY}, NCCL ${NCCL_LIBRARY}")
