# VtPackage.cmake — the SDK an install exports, so a backend plugin builds out
# of tree against nothing but installed files:
#   <prefix>/include/vt/*.h                     the public ABI headers (top CMakeLists.txt)
#   <prefix>/lib/cmake/vt/vtConfig.cmake etc.   find_package(vt): vt::headers, vt::vt, vt::cli
#   <prefix>/lib/pkgconfig/vt.pc                pkg-config vt
# Included from the top CMakeLists.txt after core/ (it names the vt targets).
include(CMakePackageConfigHelpers)

# The plugin's target: headers only. Plugins never link libvt (vt_host is
# their whole view of the runtime), so this is what find_package users link.
add_library(vt_headers INTERFACE)
add_library(vt::headers ALIAS vt_headers)
target_include_directories(vt_headers INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(vt_headers PROPERTIES EXPORT_NAME headers)
# vt::cli: the installed `vt`, so a plugin's own tests can run `vt backends --check`.
set_target_properties(vt-cli PROPERTIES EXPORT_NAME cli)
install(TARGETS vt_headers EXPORT vtTargets COMPONENT libvt-dev)

set(VT_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vt)
install(EXPORT vtTargets NAMESPACE vt:: DESTINATION ${VT_CMAKE_INSTALL_DIR} COMPONENT libvt-dev)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vtConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/vtConfig.cmake
  INSTALL_DESTINATION ${VT_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR VT_INSTALL_BACKEND_DIR)
# The package version is the project's; the plugin ABI is versioned apart
# (vt_ABI_MAJOR/MINOR) and checked at load time, not here. Before 1.0 a
# minor release may change the API, so a request for 0.1 takes 0.1.x only.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_vt_compat SameMinorVersion)
else()
  set(_vt_compat SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/vtConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${_vt_compat})
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vtConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/vtConfigVersion.cmake
  DESTINATION ${VT_CMAKE_INSTALL_DIR} COMPONENT libvt-dev)

# vt.pc: the ABI version from the header (one source of truth), and the prefix
# as a path relative to the .pc file (`cmake --install --prefix` relocates).
file(STRINGS ${PROJECT_SOURCE_DIR}/include/vt/vt_backend.h _vt_abi_lines REGEX "^#define VT_ABI_(MAJOR|MINOR) [0-9]+")
foreach(_vt_line IN LISTS _vt_abi_lines)
  if(_vt_line MATCHES "^#define VT_ABI_(MAJOR|MINOR) ([0-9]+)")
    set(VT_ABI_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
  endif()
endforeach()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "vt.pc: CMAKE_INSTALL_LIBDIR must be relative to the prefix (got ${CMAKE_INSTALL_LIBDIR})")
endif()
file(RELATIVE_PATH VT_PC_PREFIX_FROM_PCDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" VT_PC_PREFIX_FROM_PCDIR "${VT_PC_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/vt.pc.in ${CMAKE_CURRENT_BINARY_DIR}/vt.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT libvt-dev)
