# Sources of the recorders layer: our own record formats.
target_sources(torchport PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/binary_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/msgpack_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorder.cpp
)
# msgpack-cxx is header-only; used without Boost, it needs no link-time
# dependency (so consumers of a static torchport need not find it).
find_path(MSGPACK_CXX_INCLUDE_DIR msgpack.hpp REQUIRED)
target_include_directories(torchport SYSTEM PRIVATE ${MSGPACK_CXX_INCLUDE_DIR})
target_compile_definitions(torchport PRIVATE MSGPACK_NO_BOOST MSGPACK_DEFAULT_API_VERSION=3)
