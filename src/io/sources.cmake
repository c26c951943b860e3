# Sources of the io layer.
target_sources(torchport_read_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/atomic_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/byte_reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/compression.cpp
  ${CMAKE_CURRENT_LIST_DIR}/source.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tar.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zip.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zip_writer.cpp
)
