// The libcurl calls whose failure the client must survive, behind one table,
// so that tests can make them fail: a handle that cannot be made, a transfer
// the multi handle refuses, a failing transfer loop, a refused option. Every
// other call goes to libcurl directly. Internal to the backend (tests include it).
#pragma once

#include <curl/curl.h>

namespace dfl::backend::curl_seam {

struct Calls {
  CURL* (*easy_init)() = &curl_easy_init;
  CURLMcode (*multi_add_handle)(CURLM*, CURL*) = &curl_multi_add_handle;
  CURLMcode (*multi_perform)(CURLM*, int*) = &curl_multi_perform;
  // Asked before each option of a transfer is set: anything but CURLE_OK
  // is taken as libcurl's refusal of that option.
  CURLcode (*before_setopt)(CURLoption) = nullptr;
};

// The calls in use. A test replaces them before it makes a Client and puts
// them back after the Client is gone (no Client may run meanwhile).
Calls& calls();

}  // namespace dfl::backend::curl_seam
