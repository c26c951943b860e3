# Warning and sanitizer flags, applied per target.
function(torchport_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
      -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough>
    # GCC 12 reports std::string inserts as overlapping memcpy at -O2/-O3
    # (a false positive, GCC bug 105651).
    $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>
    $<$<BOOL:${TORCHPORT_WERROR}>:-Werror>)
  if(TORCHPORT_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  # libFuzzer needs the code it explores instrumented for coverage; the fuzz
  # targets themselves add -fsanitize=fuzzer (fuzz/CMakeLists.txt).
  if(TORCHPORT_BUILD_FUZZERS AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()
