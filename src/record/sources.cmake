# Sources of the record layer: key remapping and filtering, adapters,
# precision settings, typed loading and its report.
target_sources(torchport_record_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/adapter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision.cpp
  ${CMAKE_CURRENT_LIST_DIR}/remap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/report.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shard_plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shard_reads.cpp
  ${CMAKE_CURRENT_LIST_DIR}/export.cpp
)
