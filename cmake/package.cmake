# The Debian package (scripts/package.sh): `cpack -G DEB` in a release tree writes
# ringbench_<version>_amd64.deb, or ringbench-cuda_<version>_amd64.deb from a tree built with
# CUDA. It holds /usr/bin/ringbench, the sweep configs in /usr/share/ringbench/configs, and
# README.md and docs/ in /usr/share/doc/ringbench. The shared libraries it
# links (oneDNN, Open MPI, yaml-cpp, libcrypto, libibverbs, and CUDA's when built with it)
# become its Depends through dpkg-shlibdeps; the programs it runs are declared beside them.
include(GNUInstallDirs)
install(TARGETS ringbench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ringbench/configs)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs OPTIONAL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ringbench)
if(RINGBENCH_HAVE_CUDA)
  set(CPACK_PACKAGE_NAME ringbench-cuda)
  set(CPACK_DEBIAN_PACKAGE_PROVIDES ringbench)
  set(CPACK_DEBIAN_PACKAGE_CONFLICTS ringbench)
  # The toolkit's libraries come from NVIDIA's installer or repository, not from a Debian
  # package dpkg-shlibdeps could name: they are looked up there and left out of Depends.
  get_filename_component(RINGBENCH_CUDA_LIBDIR "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${RINGBENCH_CUDA_LIBDIR}/../lib64;${RINGBENCH_CUDA_LIBDIR}/../lib")
  # So apt cannot check them: its postinst names the ones missing and what to install.
  set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${PROJECT_SOURCE_DIR}/cmake/deb-cuda/postinst")
  set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
endif()
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ringbench maintainers <ringbench@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "measure how data-parallel training scales across a cluster, and why")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # NAME_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Run, not linked: mpirun for the MPI baseline and sweeps under mpirun, ip/tc and ss for the
# emulated cluster, gnuplot for the report's plots, the Fashion-MNIST data training is checked on.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "openmpi-bin, iproute2, procps")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "gnuplot-nox, dataset-fashion-mnist, ibverbs-providers")
set(CPACK_STRIP_FILES ON)
include(CPack)
