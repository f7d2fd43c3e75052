# cmake -DROOT=<repo> -P check_layering.cmake
cmake_policy(SET CMP0007 NEW)
# Fails when a source file includes something its layer may not depend on (style.md 4.5).
# Each rule: folder | project include prefixes it may use | third-party includes it may use.

set(_project_prefixes "compiler/" "runtime/" "executor/" "grammar/")
set(_rules
  "compiler/source|compiler/source/|"
  "compiler/diag|compiler/source/ compiler/diag/|"
  "compiler/syntax|compiler/source/ compiler/diag/ compiler/syntax/ grammar/|antlr4"
  "compiler/model|compiler/source/ compiler/diag/ compiler/model/|"
  "compiler/program|compiler/source/ compiler/diag/ compiler/model/ compiler/plan/ compiler/program/|"
  "compiler/plan|compiler/source/ compiler/plan/|"
  "compiler/bind|compiler/source/ compiler/diag/ compiler/syntax/ compiler/model/ compiler/plan/ compiler/bind/|re2"
  "compiler/lower|compiler/source/ compiler/diag/ compiler/model/ compiler/plan/ compiler/bind/ compiler/lower/|"
  "compiler/driver|compiler/|"
  "compiler|compiler/|"
  "runtime|runtime/|torch"
  "runtime/program|runtime/ compiler/source/ compiler/model/ compiler/plan/ compiler/program/|torch"
  "compiler/cost|compiler/|"
  "executor|compiler/source/ compiler/diag/ compiler/model/ compiler/plan/ compiler/program/ compiler/cost/ compiler/compile.h compiler/rederive.h runtime/ executor/|torch")
# Third-party families that only some layers may include, and how to recognise them.
set(_family_torch "^<(torch|ATen|c10|caffe2|gloo)/")
set(_family_antlr4 "antlr4-runtime|^<antlr4|Parser\\.h\"|Lexer\\.h\"")
set(_family_re2 "^<re2/")

set(_violations "")
file(GLOB_RECURSE _files RELATIVE ${ROOT}
     ${ROOT}/compiler/*.h ${ROOT}/compiler/*.cpp ${ROOT}/runtime/*.h ${ROOT}/runtime/*.cpp
     ${ROOT}/executor/*.h ${ROOT}/executor/*.cpp)
foreach(file IN LISTS _files)
  # The most specific rule whose folder contains the file.
  set(_allowed "")
  set(_families "")
  set(_best_len -1)
  foreach(rule IN LISTS _rules)
    string(REPLACE "|" ";" _parts "${rule}")
    list(GET _parts 0 _folder)
    list(GET _parts 1 _prefixes)
    list(LENGTH _parts _n)
    set(_fam "")
    if(_n GREATER 2)
      list(GET _parts 2 _fam)
    endif()
    string(LENGTH "${_folder}" _len)
    if(file MATCHES "^${_folder}/" AND _len GREATER _best_len)
      set(_best_len ${_len})
      string(REPLACE " " ";" _allowed "${_prefixes}")
      string(REPLACE " " ";" _families "${_fam}")
    endif()
  endforeach()
  file(STRINGS ${ROOT}/${file} _includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS _includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*" "" inc "${line}")
    string(REGEX REPLACE "[ \t]*//.*$" "" inc "${inc}")
    # Project headers: must start with an allowed prefix.
    if(inc MATCHES "^\"(compiler|runtime|executor|grammar)/")
      string(REGEX REPLACE "^\"" "" path "${inc}")
      set(_ok FALSE)
      foreach(prefix IN LISTS _allowed)
        string(FIND "${path}" "${prefix}" _pos)
        if(_pos EQUAL 0)
          set(_ok TRUE)
        endif()
      endforeach()
      if(NOT _ok)
        string(REPLACE ";" " " _allowed_text "${_allowed}")
        list(APPEND _violations "${file}: includes ${inc}, but this layer may include only: ${_allowed_text}")
      endif()
    endif()
    foreach(family torch antlr4 re2)
      if(inc MATCHES "${_family_${family}}")
        list(FIND _families ${family} _found)
        if(_found EQUAL -1)
          list(APPEND _violations "${file}: includes ${inc}, but ${family} headers are not allowed in this layer")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

list(LENGTH _files _count)
if(_violations)
  list(LENGTH _violations _nv)
  string(REPLACE ";" "\n  " _text "${_violations}")
  message(FATAL_ERROR "layering: ${_nv} violation(s) in ${_count} files:\n  ${_text}")
endif()
message(STATUS "layering: ${_count} files, no violations")
