# Installable CMake package: find_package(weft) gives weft::compiler (torch-free) and, when the
# torch side was built, weft::executor. Headers keep their repository paths under include/.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)
get_property(_weft_libs GLOBAL PROPERTY WEFT_INSTALLED_LIBRARIES)
install(TARGETS ${_weft_libs} EXPORT weftTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(layer compiler runtime executor)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${layer})
    install(DIRECTORY ${layer}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${layer}
            FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
  endif()
endforeach()
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
set(WEFT_PACKAGE_HAS_EXECUTOR ${WEFT_HAVE_TORCH})
configure_package_config_file(cmake/weftConfig.cmake.in
  ${PROJECT_BINARY_DIR}/weftConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/weftConfig.cmake ${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
install(TARGETS weft RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET weft-run)
  install(TARGETS weft-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
# The data weft-run reads from <prefix>/share/weft (executor/plan_loader.h DataDir): plans, graphs
# and the model configs --dump-graph traces at.
install(DIRECTORY plans graphs DESTINATION ${CMAKE_INSTALL_DATADIR}/weft)
install(DIRECTORY tools/model_configs DESTINATION ${CMAKE_INSTALL_DATADIR}/weft/tools)
