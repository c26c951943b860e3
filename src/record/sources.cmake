# Sources of the record layer: key remapping and filtering, adapters,
# precision settings, typed loading and its report.
target_sources(torchport_record_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/adapter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/suggest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision.cpp
  ${CMAKE_CURRENT_LIST_DIR}/remap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/report.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shard_plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shard_reads.cpp
  ${CMAKE_CURRENT_LIST_DIR}/export.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pytorch_layout.cpp
)
# The PyTorch layouts a record of a module keeps are JSON (header-only: no
# consumer needs it).
target_link_libraries(torchport_record_objects PRIVATE nlohmann_json::nlohmann_json)
