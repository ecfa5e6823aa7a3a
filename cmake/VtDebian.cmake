# VtDebian.cmake — `cpack -G DEB` in the build folder makes three packages,
# one per install component:
#   vt-llm     /usr/bin/vt, the backends (/usr/lib/vt), /etc/vt/*.ini
#              (conffiles), the systemd unit vt-serve.service (not enabled).
#              Not named vt: Debian has a package vt (genomics tools, a
#              higher version, its own /usr/bin/vt) that an upgrade would
#              put in its place; vt-llm conflicts with it instead.
#   libvt      libvt.so.<major> for embedders
#   libvt-dev  headers, vt.pc, the CMake package (find_package(vt)),
#              the libvt.so link name
# The package is laid out under /usr whatever prefix the build was configured
# with: bin/ and lib/ keep their relative places, so the installed vt finds
# its backends at <bin>/../lib/vt as it does after `cmake --install`
# (core/runtime/registry.c, VT_BIN_TO_LIBDIR).
set(CPACK_PACKAGE_NAME vt)
set(CPACK_PACKAGE_VENDOR "vt")
set(CPACK_PACKAGE_CONTACT "vt maintainers <vt@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "CPU runtime for GGUF language models")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# With CPACK_SET_DESTDIR this is the prefix the install runs with.
set(CPACK_INSTALL_PREFIX /usr)
# Install with DESTDIR=<staging> and the prefix /usr, so the install rules
# that put configuration in /etc and the unit in /lib/systemd/system (top
# CMakeLists.txt) see the system prefix and land inside the package.
set(CPACK_SET_DESTDIR ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL vt libvt libvt-dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)

# CPack makes CPACK_PACKAGE_DESCRIPTION_SUMMARY every package's synopsis line
# and indents these as the long description.
set(CPACK_DEBIAN_VT_PACKAGE_NAME vt-llm)
# Conflicts and Replaces together (Debian policy 7.6.2): installing vt-llm
# removes a package named vt and takes over /usr/bin/vt, whether that is
# Debian's or this project's earlier package of that name.
set(CPACK_DEBIAN_VT_PACKAGE_CONFLICTS vt)
set(CPACK_DEBIAN_VT_PACKAGE_REPLACES vt)
set(CPACK_DEBIAN_VT_PACKAGE_SECTION science)
set(CPACK_DEBIAN_VT_DESCRIPTION "The vt command and its backends. vt runs, checks and serves GGUF language
models on the CPU. `vt serve` is an OpenAI-compatible HTTP server; the unit
vt-serve.service (installed, not enabled) runs it from /etc/vt/vt-serve.ini.")
# Named after the library's SONAME (libvt.so.0), as Debian policy 8.1 asks,
# so a libvt.so.1 can one day be installed beside it; it takes the place of
# this project's earlier package "libvt", which held the same file.
set(CPACK_DEBIAN_LIBVT_PACKAGE_NAME libvt0)
set(CPACK_DEBIAN_LIBVT_PACKAGE_CONFLICTS libvt)
set(CPACK_DEBIAN_LIBVT_PACKAGE_REPLACES libvt)
set(CPACK_DEBIAN_LIBVT_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBVT_DESCRIPTION "The shared library: libvt embeds vt's runtime (include/vt/vt.h) in another
program. It loads the backends the vt-llm package installs.")
set(CPACK_DEBIAN_LIBVT-DEV_PACKAGE_NAME libvt-dev)
set(CPACK_DEBIAN_LIBVT-DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_LIBVT-DEV_DESCRIPTION "Development files: headers, pkg-config file and CMake package for embedding
libvt and for building backend plugins out of tree.")

# libvt loads its backends from the vt-llm package (<libdir>/vt); the CMake
# package names libvt.so and /usr/bin/vt (vt::cli), so find_package(vt) needs
# both installed. The versions are pinned: the plugin ABI and the exported
# targets are those of this exact build.
set(CPACK_DEBIAN_LIBVT_PACKAGE_RECOMMENDS "vt-llm (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_LIBVT-DEV_PACKAGE_DEPENDS "libvt0 (= ${PROJECT_VERSION}), vt-llm (= ${PROJECT_VERSION})")

# The Debian libraries the binaries link, computed by dpkg-shlibdeps (package
# dpkg-dev) from the ELF files themselves; without it, the list by hand (what
# `objdump -p` shows as NEEDED on Debian 12: libc, libm, libffi, libinih,
# libmicrohttpd, libjansson, oneDNN 2 — what dpkg-shlibdeps finds there).
find_program(VT_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(VT_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  set(_vt_deps "libc6 (>= 2.34), libffi8 (>= 3.4), libinih1 (>= 40)")
  if(VT_HAVE_SERVE)
    string(APPEND _vt_deps ", libmicrohttpd12 (>= 0.9.50), libjansson4 (>= 2.14)")
  endif()
  if(VT_HAVE_ONEDNN)
    string(APPEND _vt_deps ", libdnnl2 (>= 2.0)")
  endif()
  set(CPACK_DEBIAN_VT_PACKAGE_DEPENDS "${_vt_deps}")
  set(CPACK_DEBIAN_LIBVT_PACKAGE_DEPENDS "libc6 (>= 2.34), libinih1 (>= 40)")
endif()

# Files under /etc are the administrator's once installed: dpkg keeps local
# edits on upgrade (and asks) only for conffiles.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/debian-vt/conffiles "/etc/vt/vt.ini\n/etc/vt/vt-serve.ini\n")
# The maintainer scripts (conf/debian/) tell systemd about the unit, stop the
# service before removal and restart a running one on upgrade; none enables it.
set(CPACK_DEBIAN_VT_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_BINARY_DIR}/debian-vt/conffiles
  ${PROJECT_SOURCE_DIR}/conf/debian/postinst ${PROJECT_SOURCE_DIR}/conf/debian/prerm
  ${PROJECT_SOURCE_DIR}/conf/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# libvt: a shlibs file (what a package linking it depends on), and dpkg's
# ldconfig trigger, which refreshes the dynamic linker's cache once per dpkg
# run (CPack's generated postinst/postrm call ldconfig as well).
# (Global: CPack 3.25 has no per-package switch. The backends are plugins
# without a SONAME, which CPack reports as an author warning and leaves out.)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/debian-libvt/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_LIBVT_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_BINARY_DIR}/debian-libvt/triggers)
# Installed binaries without their symbol tables (the build folder keeps them).
set(CPACK_STRIP_FILES ON)

include(CPack)
