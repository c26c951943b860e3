# Sources of the torchport::remote component (io layer): remote objects read
# by ranges through libcurl, which it loads when a URL is first opened.
target_sources(torchport_remote_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/remote.cpp
)
