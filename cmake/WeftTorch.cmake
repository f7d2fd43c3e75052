# Finds LibTorch (normally the one inside the project virtualenv's torch wheel, found through
# CMAKE_PREFIX_PATH = torch.utils.cmake_prefix_path) and defines weft::torch_deps.
#
# The wheel's TorchConfig.cmake wants a CUDA toolkit when the wheel was built with CUDA, which
# a CPU-only machine does not have. weft only needs the headers and the shared libraries, so
# it imports them directly from the install that TorchConfig.cmake would describe, and links
# the CUDA libraries only where they are present and usable.
set(WEFT_HAVE_TORCH OFF)
find_path(WEFT_TORCH_ROOT share/cmake/Torch/TorchConfig.cmake
          PATHS ${CMAKE_PREFIX_PATH} PATH_SUFFIXES .. ../.. NO_DEFAULT_PATH)
if(NOT WEFT_TORCH_ROOT)
  find_path(WEFT_TORCH_ROOT share/cmake/Torch/TorchConfig.cmake)
endif()
if(NOT WEFT_TORCH_ROOT)
  if(WEFT_BUILD_EXECUTOR STREQUAL "ON")
    message(FATAL_ERROR "WEFT_BUILD_EXECUTOR=ON but LibTorch was not found; pass "
            "-DCMAKE_PREFIX_PATH=$(python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')")
  endif()
  message(STATUS "weft: LibTorch not found; building the compiler only")
  return()
endif()
get_filename_component(WEFT_TORCH_ROOT "${WEFT_TORCH_ROOT}" REALPATH)

# libtorch.so itself holds no code weft calls: in a CUDA wheel it only pulls in libtorch_cuda and,
# through it, cuBLAS, cuDNN, NCCL ... -- 400 MB more resident memory and ~0.5 s more start-up per
# process, which every rank of every CPU run paid. So a CPU build links torch_cpu and c10 alone.
set(_torch_libs torch_cpu c10)
set(WEFT_TORCH_CUDA OFF)
if(EXISTS "${WEFT_TORCH_ROOT}/lib/libtorch_cuda.so" AND WEFT_ENABLE_CUDA)
  list(APPEND _torch_libs torch torch_cuda c10_cuda)
  set(WEFT_TORCH_CUDA ON)
endif()
add_library(weft_torch_deps INTERFACE)
add_library(weft::torch_deps ALIAS weft_torch_deps)
foreach(lib IN LISTS _torch_libs)
  find_library(WEFT_TORCH_LIB_${lib} ${lib} PATHS "${WEFT_TORCH_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
  target_link_libraries(weft_torch_deps INTERFACE "${WEFT_TORCH_LIB_${lib}}")
endforeach()
# SYSTEM: LibTorch's headers are not held to weft's warning flags.
target_include_directories(weft_torch_deps SYSTEM INTERFACE
  "${WEFT_TORCH_ROOT}/include"
  "${WEFT_TORCH_ROOT}/include/torch/csrc/api/include")
# The wheel is built with the C++11 ABI and with Gloo; USE_C10D_GLOO unlocks its header.
target_compile_definitions(weft_torch_deps INTERFACE _GLIBCXX_USE_CXX11_ABI=1 USE_C10D_GLOO USE_DISTRIBUTED)
if(WEFT_TORCH_CUDA)
  target_compile_definitions(weft_torch_deps INTERFACE WEFT_WITH_CUDA USE_C10D_NCCL)
endif()
# weft's binaries find libtorch where it was found, with no LD_LIBRARY_PATH.
target_link_options(weft_torch_deps INTERFACE "-Wl,-rpath,${WEFT_TORCH_ROOT}/lib" "-Wl,--no-as-needed")
find_package(Threads REQUIRED)
target_link_libraries(weft_torch_deps INTERFACE Threads::Threads)
set(WEFT_HAVE_TORCH ON)
message(STATUS "weft: LibTorch at ${WEFT_TORCH_ROOT} (CUDA: ${WEFT_TORCH_CUDA})")
set_target_properties(weft_torch_deps PROPERTIES EXPORT_NAME torch_deps)
set_property(GLOBAL APPEND PROPERTY WEFT_INSTALLED_LIBRARIES weft_torch_deps)
