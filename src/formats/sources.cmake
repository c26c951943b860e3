# Sources of the formats layer, one folder per job (docs/architecture.md):
#   read/      open(), the registry of formats in torch.load's order, and the
#              readers: torch's zip, TorchScript, legacy and tar formats with
#              their tensor rebuilds, safetensors, sharded checkpoints
#   catalog/   the catalogue and its operations: transform, slice, prune,
#              compare, module tree, materialize
#   recorders/ our own record files (.mpk, .json, .tpb, each optionally gzipped)
#   write/     the writers behind save(): safetensors, PyTorch zip, shards
#   scan/      scan(): what a file would make Python import and run
target_sources(torchport_read_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/read/numpy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/numpy_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/open.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/pytorch_legacy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/pytorch_tar.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/pytorch_zip.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/quantized.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/registry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/dcp.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/dcp_chunks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/dcp_safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/sharded.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/torch_export.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/sparse.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/strict_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/torch_common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/read/walk.cpp
  ${CMAKE_CURRENT_LIST_DIR}/catalog/catalog.cpp
  ${CMAKE_CURRENT_LIST_DIR}/catalog/compare.cpp
  ${CMAKE_CURRENT_LIST_DIR}/catalog/materialize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/catalog/module_tree.cpp
  ${CMAKE_CURRENT_LIST_DIR}/catalog/prune.cpp
  ${CMAKE_CURRENT_LIST_DIR}/catalog/slice.cpp
  ${CMAKE_CURRENT_LIST_DIR}/catalog/transform.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorders/binary_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorders/json_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorders/msgpack_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorders/record_common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorders/record_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/write/pytorch_writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/write/safetensors_writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/write/save.cpp
  ${CMAKE_CURRENT_LIST_DIR}/write/write_common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scan/dbm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scan/directory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scan/scan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scan/scan_json.cpp
)
