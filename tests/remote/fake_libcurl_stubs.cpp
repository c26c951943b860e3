// Test fakes of libcurl.so.4 (lazy_libcurl.sh): every function the remote
// component binds but curl_version_info, which fake_libcurl_old.cpp adds.
// Alone they make a library that lacks a function; none is ever called
// (the version is checked first), so each is an empty stub, declared
// without curl.h, whose declarations they would contradict.
#define TORCHPORT_FAKE_CURL(name) \
  extern "C" __attribute__((visibility("default"))) void name() {}
TORCHPORT_FAKE_CURL(curl_global_init)
TORCHPORT_FAKE_CURL(curl_easy_init)
TORCHPORT_FAKE_CURL(curl_easy_cleanup)
TORCHPORT_FAKE_CURL(curl_easy_reset)
TORCHPORT_FAKE_CURL(curl_easy_setopt)
TORCHPORT_FAKE_CURL(curl_easy_perform)
TORCHPORT_FAKE_CURL(curl_easy_strerror)
TORCHPORT_FAKE_CURL(curl_slist_append)
TORCHPORT_FAKE_CURL(curl_slist_free_all)
TORCHPORT_FAKE_CURL(curl_url)
TORCHPORT_FAKE_CURL(curl_url_cleanup)
TORCHPORT_FAKE_CURL(curl_url_set)
TORCHPORT_FAKE_CURL(curl_url_get)
TORCHPORT_FAKE_CURL(curl_free)
