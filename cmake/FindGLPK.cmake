# FindGLPK: the GNU Linear Programming Kit (Debian: libglpk-dev).
# Defines the imported target GLPK::GLPK and the variables GLPK_FOUND,
# GLPK_INCLUDE_DIR, GLPK_LIBRARY. Installed beside sanpathConfig.cmake so that
# consumers of the installed (static) library find the same dependency.
find_path(GLPK_INCLUDE_DIR glpk.h)
find_library(GLPK_LIBRARY glpk)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(GLPK REQUIRED_VARS GLPK_LIBRARY GLPK_INCLUDE_DIR)
if(GLPK_FOUND AND NOT TARGET GLPK::GLPK)
  add_library(GLPK::GLPK UNKNOWN IMPORTED)
  set_target_properties(GLPK::GLPK PROPERTIES IMPORTED_LOCATION "${GLPK_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${GLPK_INCLUDE_DIR}")
endif()
mark_as_advanced(GLPK_INCLUDE_DIR GLPK_LIBRARY)
