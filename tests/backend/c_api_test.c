/* The C API from a C program, against the loopback server that
 * run_c_api_test.py starts (a.bin served whole; b.bin held after 100,000 of
 * its 200,000 bytes): fetch, progress, pause and resume, cancel, metrics,
 * and errors with their messages. Usage: c_api_test URL_TEMPLATE CACHE_DIR */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "demandflight/backend/c_api.h"

static atomic_int ended;
static dfl_outcome outcomes[2];
static char pin_path[4096];

static void on_terminal(void* user, dfl_demand demand, const dfl_result* result) {
  (void)demand;
  const int which = *(const int*)user;
  outcomes[which] = result->outcome;
  if (result->pin != NULL) {
    snprintf(pin_path, sizeof pin_path, "%s", dfl_pin_path(result->pin));
    dfl_pin_release(result->pin);
  }
  atomic_fetch_add(&ended, 1);
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

#define CHECK(cond, ...)                             \
  do {                                               \
    if (!(cond)) {                                   \
      fprintf(stderr, "c_api_test: %s: ", #cond);    \
      fprintf(stderr, __VA_ARGS__);                  \
      fprintf(stderr, "\n");                         \
      return 1;                                      \
    }                                                \
  } while (0)

/* Polls b's progress until `stage` with at least `bytes` received (10 s). */
static int wait_for(dfl_client* client, dfl_demand b, dfl_stage stage, uint64_t bytes,
                    dfl_progress* p) {
  for (int i = 0; i < 2000; ++i) {
    if (dfl_progress_of(client, b, p) == DFL_OK && p->stage == stage && p->received >= bytes)
      return 1;
    sleep_ms(5);
  }
  return 0;
}

int main(int argc, char** argv) {
  CHECK(argc == 3, "usage: c_api_test URL_TEMPLATE CACHE_DIR");

  /* Errors: named, with a status. */
  dfl_client* client = NULL;
  dfl_options* options = dfl_options_new();
  CHECK(dfl_client_new(options, &client) == DFL_INVALID_ARGUMENT && client == NULL, "%s",
        dfl_last_error());
  CHECK(strstr(dfl_last_error(), "URL template") != NULL, "%s", dfl_last_error());
  CHECK(dfl_options_set_url_template(options, argv[1]) == DFL_OK, "%s", dfl_last_error());
  CHECK(dfl_client_new(options, &client) == DFL_INVALID_ARGUMENT, "no cache dir accepted");
  CHECK(strstr(dfl_last_error(), "cache_dir") != NULL, "%s", dfl_last_error());
  CHECK(dfl_options_set_cache_dir(options, argv[2]) == DFL_OK, "%s", dfl_last_error());
  CHECK(dfl_options_set_progress_interval(options, 0.02) == DFL_OK, "%s", dfl_last_error());
  CHECK(dfl_client_new(options, &client) == DFL_OK, "%s", dfl_last_error());
  CHECK(strcmp(dfl_last_error(), "") == 0, "a success leaves no message");
  dfl_options_free(options);

  dfl_artifact bad = {"a.bin", "r1", "pc", 0, 0, 200000, "not a digest"};
  dfl_demand ignored;
  CHECK(dfl_subscribe(client, &bad, NULL, on_terminal, NULL, &ignored) == DFL_INVALID_ARGUMENT,
        "a malformed sha256 accepted");
  CHECK(strstr(dfl_last_error(), "sha256") != NULL, "%s", dfl_last_error());

  /* a.bin: fetched, verified, installed, pinned. */
  static int which[2] = {0, 1};
  dfl_artifact a = {"a.bin", "r1", "pc", 0, 0, 200000, NULL};
  dfl_artifact b = {"b.bin", "r1", "pc", 0, 0, 200000, NULL};
  dfl_demand_options opts = {1, 0, 3, 0};
  dfl_demand da, db;
  CHECK(dfl_subscribe(client, &a, &opts, on_terminal, &which[0], &da) == DFL_OK, "%s",
        dfl_last_error());
  CHECK(dfl_subscribe(client, &b, &opts, on_terminal, &which[1], &db) == DFL_OK, "%s",
        dfl_last_error());
  for (int i = 0; i < 2000 && atomic_load(&ended) < 1; ++i) sleep_ms(5);
  CHECK(atomic_load(&ended) == 1 && outcomes[0] == DFL_SUCCEEDED, "a.bin: ended %d, outcome %d",
        atomic_load(&ended), (int)outcomes[0]);
  CHECK(strstr(pin_path, "objects") != NULL, "pin path %s", pin_path);
  dfl_progress p;
  CHECK(dfl_progress_of(client, da, &p) == DFL_NOT_FOUND, "an ended demand has progress");

  /* b.bin: held mid-body by the server; its progress, paused, resumed. */
  CHECK(wait_for(client, db, DFL_TRANSFERRING, 100000, &p), "b.bin never reached 100,000 bytes");
  CHECK(p.expected == 200000, "expected %llu", (unsigned long long)p.expected);
  CHECK(dfl_pause(client, 1, 0) == DFL_OK, "%s", dfl_last_error());
  CHECK(dfl_progress_of(client, db, &p) == DFL_OK && p.stage == DFL_PAUSED, "stage %d",
        (int)p.stage);
  CHECK(dfl_resume(client) == DFL_OK, "%s", dfl_last_error());
  CHECK(wait_for(client, db, DFL_TRANSFERRING, 100000, &p), "b.bin not transferring again");

  /* Cancelled: its own terminal, at once. */
  CHECK(dfl_cancel(client, db) == DFL_OK, "%s", dfl_last_error());
  for (int i = 0; i < 2000 && atomic_load(&ended) < 2; ++i) sleep_ms(5);
  CHECK(atomic_load(&ended) == 2 && outcomes[1] == DFL_CANCELLED, "b.bin: outcome %d",
        (int)outcomes[1]);

  char* metrics = dfl_metrics_text(client);
  CHECK(metrics != NULL && strstr(metrics, "demandflight_") != NULL, "metrics: %s",
        metrics ? metrics : dfl_last_error());
  dfl_string_free(metrics);
  dfl_client_free(client);
  printf("c_api_test: fetched a.bin (%s), b.bin's progress paused and resumed, cancelled\n",
         pin_path);
  return 0;
}
