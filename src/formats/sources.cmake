# Sources of the formats layer: the readers, the catalogue, the writers, and
# our own record files (.mpk, .json, .tpb, each optionally gzipped).
target_sources(torchport_read_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/binary_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/catalog.cpp
  ${CMAKE_CURRENT_LIST_DIR}/compare.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/materialize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/module_tree.cpp
  ${CMAKE_CURRENT_LIST_DIR}/msgpack_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/numpy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/prune.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pytorch_legacy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pytorch_tar.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pytorch_writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/quantized.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pytorch_zip.cpp
  ${CMAKE_CURRENT_LIST_DIR}/record_common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/record_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sparse.cpp
  ${CMAKE_CURRENT_LIST_DIR}/safetensors_writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/save.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sharded.cpp
  ${CMAKE_CURRENT_LIST_DIR}/slice.cpp
  ${CMAKE_CURRENT_LIST_DIR}/strict_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/torch_common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/transform.cpp
  ${CMAKE_CURRENT_LIST_DIR}/write_common.cpp
)
