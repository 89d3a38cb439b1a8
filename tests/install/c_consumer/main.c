/* The installed C API: a client needs a URL template, and says so; with one
 * and the cache directory given, it is made and freed. */
#include <stdio.h>
#include <string.h>

#include "demandflight/backend/c_api.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  dfl_options* options = dfl_options_new();
  dfl_client* client = NULL;
  if (dfl_client_new(options, &client) != DFL_INVALID_ARGUMENT) return 1;
  if (strstr(dfl_last_error(), "URL template") == NULL) return 1;
  dfl_options_set_url_template(options, "http://127.0.0.1:9/{resource}");
  dfl_options_set_cache_dir(options, argv[1]);
  if (dfl_client_new(options, &client) != DFL_OK) {
    fprintf(stderr, "%s\n", dfl_last_error());
    return 1;
  }
  dfl_client_free(client);
  dfl_options_free(options);
  printf("c consumer: a client made and freed through the installed C API\n");
  return 0;
}
