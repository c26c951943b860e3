// With fake_libcurl_stubs.cpp, a test fake of libcurl.so.4 that has every
// function but says it is 7.84.0, one release older than the remote
// component needs (lazy_libcurl.sh).
#include <curl/curl.h>

extern "C" __attribute__((visibility("default"))) curl_version_info_data* curl_version_info(
    CURLversion /*unused*/) {
  static curl_version_info_data d{};
  d.age = CURLVERSION_NOW;
  d.version = "7.84.0";
  d.version_num = 0x075400;
  return &d;
}
