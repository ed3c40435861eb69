# `cmake --install` and the exported CMake package: after installing to PREFIX, a project with
# CMAKE_PREFIX_PATH=PREFIX writes find_package(halo) and links halo::graph, halo::partition,
# halo::gnn or halo::runtime (tests/consumer is such a project). The libraries are static, so
# their private dependencies are needed at link time too: cmake/haloConfig.cmake.in finds them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HALO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/halo)

# Makes library `target` installable as halo::`name` (also its name inside this build).
# The libraries' CMakeLists stay install-agnostic; this adjusts two properties that would
# otherwise break the export:
# - include directories name the source tree: the installed copy uses <prefix>/include;
# - halo_warnings (compile options only) would be exported as a link dependency of a static
#   library, $<LINK_ONLY:halo_warnings>; it is meaningless to a consumer, so it is dropped.
function(halo_export_library target name)
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  set(wrapped "")
  foreach(dir IN LISTS dirs)
    list(APPEND wrapped "$<BUILD_INTERFACE:${dir}>")
  endforeach()
  list(APPEND wrapped "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${wrapped}"
                                             EXPORT_NAME ${name})
  get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
  if(links)
    list(REMOVE_ITEM links "$<LINK_ONLY:halo_warnings>" halo_warnings)
    set_target_properties(${target} PROPERTIES INTERFACE_LINK_LIBRARIES "${links}")
  endif()
  add_library(halo::${name} ALIAS ${target})
  install(TARGETS ${target} EXPORT haloTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
                                               LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${name}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()

halo_export_library(halo_graph graph)
halo_export_library(halo_partition partition)
halo_export_library(halo_gnn gnn)
halo_export_library(halo_runtime runtime)

# The tool and the supervisor it launches for each rank: it finds it beside itself.
install(TARGETS halo halo-rank-supervisor RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT haloTargets NAMESPACE halo:: DESTINATION ${HALO_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/haloConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/haloConfig.cmake
                              INSTALL_DESTINATION ${HALO_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the interface, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/haloConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/haloConfig.cmake ${PROJECT_BINARY_DIR}/haloConfigVersion.cmake
        DESTINATION ${HALO_INSTALL_CMAKEDIR})
