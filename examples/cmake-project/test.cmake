# CTest driver (cmake -P): installs the sanpath build tree SANPATH_BUILD_DIR
# into a fresh prefix under WORK, configures and builds this consumer
# project (SOURCE) against it with find_package(sanpath), and runs it.
foreach(v SANPATH_BUILD_DIR SOURCE WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "test.cmake: -D${v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run("install" ${CMAKE_COMMAND} --install "${SANPATH_BUILD_DIR}" --prefix "${WORK}/prefix")
foreach(f include/sanpath/sanpath.hpp include/sanpath/analysis/forward.hpp bin/sanpath)
  if(NOT EXISTS "${WORK}/prefix/${f}")
    message(FATAL_ERROR "install: ${f} is missing from the prefix")
  endif()
endforeach()
# FLAGS (may be empty): compile and link flags the library was built with
# that a consumer must share (sanitizers); CXX: the same compiler.
set(extra "")
if(FLAGS)
  list(APPEND extra "-DCMAKE_CXX_FLAGS=${FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}")
endif()
if(CXX)
  list(APPEND extra "-DCMAKE_CXX_COMPILER=${CXX}")
endif()
run("configure" ${CMAKE_COMMAND} -S "${SOURCE}" -B "${WORK}/build" "-DCMAKE_PREFIX_PATH=${WORK}/prefix" ${extra})
run("build" ${CMAKE_COMMAND} --build "${WORK}/build")
run("run" "${WORK}/build/consumer")
message("${last_output}")
