# The API reference: `cmake --build build --target torchport_api_docs` runs
# Debian's doxygen (apt-get install doxygen) over the public headers and
# writes HTML to build/docs/api/html. Not part of the default build; the
# target exists only when doxygen is found. Undocumented public
# declarations are warnings, and TORCHPORT_WERROR makes them errors.
find_package(Doxygen QUIET)
if(NOT DOXYGEN_FOUND)
  message(STATUS "doxygen not found: no torchport_api_docs target (apt-get install doxygen)")
  return()
endif()
set(DOXYGEN_PROJECT_NAME torchport)
set(DOXYGEN_PROJECT_NUMBER ${PROJECT_VERSION})
set(DOXYGEN_PROJECT_BRIEF "PyTorch checkpoints in C++, without Python or libtorch")
set(DOXYGEN_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/docs/api)
set(DOXYGEN_STRIP_FROM_PATH ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
set(DOXYGEN_STRIP_FROM_INC_PATH ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
set(DOXYGEN_EXCLUDE_PATTERNS */detail/*)
set(DOXYGEN_EXCLUDE_SYMBOLS detail "*::detail::*")
set(DOXYGEN_EXTRACT_ALL NO)
set(DOXYGEN_WARN_IF_UNDOCUMENTED YES)
set(DOXYGEN_WARN_NO_PARAMDOC NO)
set(DOXYGEN_GENERATE_LATEX NO)
set(DOXYGEN_MACRO_EXPANSION YES)
set(DOXYGEN_QUIET YES)
set(DOXYGEN_USE_MDFILE_AS_MAINPAGE ${PROJECT_SOURCE_DIR}/README.md)
if(TORCHPORT_WERROR)
  set(DOXYGEN_WARN_AS_ERROR FAIL_ON_WARNINGS)
endif()
doxygen_add_docs(torchport_api_docs ${PROJECT_SOURCE_DIR}/include/torchport ${PROJECT_SOURCE_DIR}/README.md
                 ${PROJECT_SOURCE_DIR}/docs
                 COMMENT "API reference (doxygen) -> ${PROJECT_BINARY_DIR}/docs/api/html")

# With the tests, building the reference is a test: every public
# declaration must be documented (warnings fail it under TORCHPORT_WERROR).
if(TORCHPORT_BUILD_TESTS)
  add_test(NAME api_docs COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target torchport_api_docs)
  set_tests_properties(api_docs PROPERTIES LABELS unit)
endif()
