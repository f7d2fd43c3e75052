# cmake -DWEFT=<weft> -DROOT=<repo> -DEXPECTED=<file> [-DARGS=...] -P corpus_check.cmake
# Runs `weft check` on every plans/*.weft that has a graph, for the meshes of issue 4, and
# compares its diagnostics with EXPECTED (the corpus's known failures, reviewed as a golden).
# WEFT_UPDATE_GOLDENS=1 rewrites EXPECTED.
file(GLOB _plans RELATIVE ${ROOT} ${ROOT}/plans/*.weft)
# HunyuanVideo has no published-config graph here (no model config in tools/model_configs); its
# plan is checked on its program (tests/unit/program: program.plan_checks_clean.hunyuanvideo.*).
list(REMOVE_ITEM _plans plans/hunyuanvideo.weft)
# FIBO's plan splits outputs of modules registered after the ones the blocks' outputs leave by, which
# a graph cannot order (tests/zoo: plans.bria_fibo.published_program checks it on a program).
list(REMOVE_ITEM _plans plans/bria_fibo.weft)
# Kandinsky 5's gather is of frames a view parts its split tokens into, which a graph cannot follow
# (plans.kandinsky5.published_program checks it on a program).
list(REMOVE_ITEM _plans plans/kandinsky5.weft)
# HiDream-I1's RoPE table is sliced by the streams of the joint sequence it meets, which only a
# program's dataflow shows (plans.hidream.published_program checks it on a program).
list(REMOVE_ITEM _plans plans/hidream.weft)
# So is Krea 2's (plans.krea2.published_program).
list(REMOVE_ITEM _plans plans/krea2.weft)
# Wan2.2-Animate's face adapters view the split tokens per latent frame, and the frame count is read
# off the face video, which only a program's dataflow shows (plans.wan_animate.published_program).
list(REMOVE_ITEM _plans plans/wan_animate.weft)
# Ideogram 4 has no graph of its published config here; its plan is checked on the program of that
# config (plans.ideogram4.published_program).
list(REMOVE_ITEM _plans plans/ideogram4.weft)
list(SORT _plans)
separate_arguments(_args UNIX_COMMAND "${ARGS}")
# The graphs of the published models (issue 4) and of QwenImage 2.1 (class defaults, no published
# config); test-size graphs are left to their owners.
set(_graphs)
foreach(g flux1-dev flux2-dev qwen-image qwen-image-21 wan2.1-t2v-14b wan2.1-t2v-1.3b chronoedit-14b
          helios ltx-video-2b ltx-2 minimax-h3 cogvideox-5b skyreels-v2-14b-540p sana-1600m-1024px
          cogview4-6b cogview3-plus-3b sd3.5-large wan2.1-vace-14b pixart-sigma-xl-2-1024 auraflow-v0.2
          chroma1-hd dit-xl-2-256 latte-1 allegro mochi-1-preview sana-video-2b-480p
          cosmos-predict2-2b-text2image bria-3.2 ovis-image-7b joyai-image-edit omnigen-v1
          acestep-v1.5-turbo longcat-image glm-image)
  list(APPEND _graphs --graph graphs/${g}.graph.json)
endforeach()
execute_process(
  COMMAND ${WEFT} check ${_plans} ${_graphs}
          --mesh ulysses=2 --mesh ulysses=4 --mesh ulysses=8 --mesh ring=2 --mesh ring=4
          --mesh ring=2,ulysses=2 --mesh ring=2,ulysses=4 --mesh tp=2 --mesh tp=4 --mesh tp=2,ulysses=2
          ${_args}
  WORKING_DIRECTORY ${ROOT}
  RESULT_VARIABLE _rc
  ERROR_VARIABLE _stderr
  OUTPUT_VARIABLE _stdout)
set(_actual "# exit status ${_rc}\n${_stderr}")
if("$ENV{WEFT_UPDATE_GOLDENS}" STREQUAL "1")
  file(WRITE ${EXPECTED} "${_actual}")
  message(STATUS "rewrote ${EXPECTED}")
  return()
endif()
file(READ ${EXPECTED} _expected)
if(NOT _actual STREQUAL _expected)
  file(WRITE ${EXPECTED}.actual "${_actual}")
  message(FATAL_ERROR "weft check of the corpus differs from ${EXPECTED}; see ${EXPECTED}.actual "
                      "(WEFT_UPDATE_GOLDENS=1 rewrites it)")
endif()
message(STATUS "corpus check matches ${EXPECTED}")
