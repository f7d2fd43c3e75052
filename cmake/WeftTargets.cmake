# Helpers that keep every weft target declared the same way.

# Warnings as errors for weft's own code. Third-party and generated code is included as
# SYSTEM (imported targets are) or built in its own target without these flags.
function(weft_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                         -Wnon-virtual-dtor -Werror)
endfunction()

# weft_library(NAME dir-relative name, e.g. diag -> target weft_diag, alias weft::diag)
#   SOURCES ...  PUBLIC_DEPS ...  PRIVATE_DEPS ...
function(weft_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  set(target weft_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(weft::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  # Headers are addressed from the repository root: #include "compiler/diag/diagnostic.h".
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:include>)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  weft_warnings(${target})
  set_property(GLOBAL APPEND PROPERTY WEFT_INSTALLED_LIBRARIES ${target})
endfunction()

# weft_test(NAME SOURCES ... DEPS ... LABELS ... [NO_DISCOVER])
# One GoogleTest executable; each TEST becomes its own CTest entry (discovered at test time,
# so the build never runs test binaries) carrying LABELS.
include(GoogleTest)
function(weft_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  weft_warnings(${name})
  # Listing a binary's tests loads LibTorch; from a cold page cache on a busy machine that took
  # over CMake's default 5 s (CI failed at dist_rendezvous_test's discovery), so allow longer.
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
