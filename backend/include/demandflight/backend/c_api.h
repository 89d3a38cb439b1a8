/* The production client from C (and from any language that calls C: C#,
 * Rust, Go, Python's ctypes). The same Client as the C++ API
 * (demandflight/backend/client.h), behind opaque handles; every call that can
 * fail returns a dfl_status, and dfl_last_error() says why in words (the
 * field, the path, the system's reason).
 *
 * Link: the shared library demandflight_c (CMake target demandflight::c).
 * Threads: calls may come from any thread, as in C++; terminal and progress
 * callbacks run on the client's delivery thread, one after another. */
#ifndef DEMANDFLIGHT_BACKEND_C_API_H
#define DEMANDFLIGHT_BACKEND_C_API_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define DFL_API __attribute__((visibility("default")))
#else
#define DFL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dfl_status {
  DFL_OK = 0,
  DFL_INVALID_ARGUMENT = 1, /* a bad option or argument: dfl_last_error() names it */
  DFL_IO_ERROR = 2,         /* the cache directory or libcurl could not be set up */
  DFL_NOT_FOUND = 3,        /* dfl_progress: the demand has ended (or is unknown) */
  DFL_INTERNAL = 4          /* a bug: dfl_last_error() says what */
} dfl_status;

/* Why this thread's last call failed; "" after a success. Valid until this
 * thread's next call. */
DFL_API const char* dfl_last_error(void);

/* --- Options ------------------------------------------------------------ */

typedef struct dfl_options dfl_options;
DFL_API dfl_options* dfl_options_new(void);
DFL_API void dfl_options_free(dfl_options* options);
/* Required: the cache's directory. */
DFL_API dfl_status dfl_options_set_cache_dir(dfl_options* options, const char* path);
/* Required: where an artifact is fetched from, a template with {resource},
 * {revision}, {target} and {generation} (each percent-encoded). */
DFL_API dfl_status dfl_options_set_url_template(dfl_options* options, const char* pattern);
DFL_API dfl_status dfl_options_set_max_transfers(dfl_options* options, uint32_t transfers);
/* The orphan policy by name ("always-abort", "keep-partial", ...). */
DFL_API dfl_status dfl_options_set_orphan_policy(dfl_options* options, const char* spec);
/* Whether a success carries a pin (default 1). */
DFL_API dfl_status dfl_options_set_pins(dfl_options* options, int on);
/* How often progress is measured, in seconds (default 0.1). */
DFL_API dfl_status dfl_options_set_progress_interval(dfl_options* options, double seconds);

/* --- The client ---------------------------------------------------------- */

typedef struct dfl_client dfl_client;
/* *out is the new client, or NULL on failure. */
DFL_API dfl_status dfl_client_new(const dfl_options* options, dfl_client** out);
/* Demands still waiting get their terminal (cancelled) before it returns. */
DFL_API void dfl_client_free(dfl_client* client);

typedef struct dfl_artifact {
  const char* resource;   /* Required. */
  const char* revision;   /* NULL: "". */
  const char* target;     /* NULL: "". */
  uint32_t generation;
  uint32_t origin;
  uint64_t size_bytes;    /* 0: unknown. */
  const char* sha256_hex; /* NULL: no digest expected. */
} dfl_artifact;

typedef struct dfl_demand_options {
  uint32_t owner;
  uint32_t owner_generation;
  int32_t priority;
  double timeout_s; /* From now; 0 or less: no deadline. */
} dfl_demand_options;

typedef struct dfl_demand {
  uint32_t slot;
  uint32_t generation;
} dfl_demand;

typedef enum dfl_outcome {
  DFL_SUCCEEDED = 0,
  DFL_FAILED = 1,
  DFL_CANCELLED = 2,
  DFL_TIMED_OUT = 3,
  DFL_OWNER_ENDED = 4
} dfl_outcome;

/* A pin keeps an installed object from eviction, in every process, until
 * released. */
typedef struct dfl_pin dfl_pin;
DFL_API const char* dfl_pin_path(const dfl_pin* pin);
/* Releases it and frees it. */
DFL_API void dfl_pin_release(dfl_pin* pin);

typedef struct dfl_result {
  dfl_outcome outcome;
  const char* reason; /* Why it did not succeed; "" for a success. */
  /* For a success with pins on: the pin, now the callee's (release it with
   * dfl_pin_release); else NULL. */
  dfl_pin* pin;
} dfl_result;

/* A demand's one terminal. `result` and its strings live during the call. */
typedef void (*dfl_terminal_fn)(void* user, dfl_demand demand, const dfl_result* result);

DFL_API dfl_status dfl_subscribe(dfl_client* client, const dfl_artifact* artifact,
                         const dfl_demand_options* options, dfl_terminal_fn on_terminal,
                         void* user, dfl_demand* out);
DFL_API dfl_status dfl_cancel(dfl_client* client, dfl_demand demand);
DFL_API dfl_status dfl_set_priority(dfl_client* client, dfl_demand demand, int32_t priority);
/* Ends the owner's demands and releases the pins they were given. */
DFL_API dfl_status dfl_end_owner(dfl_client* client, uint32_t owner);

/* --- Progress and pause -------------------------------------------------- */

typedef enum dfl_stage {
  DFL_QUEUED = 0,
  DFL_TRANSFERRING = 1,
  DFL_RETRYING = 2,
  DFL_WAITING_ELSEWHERE = 3,
  DFL_PAUSED = 4,
  DFL_FINALIZING = 5
} dfl_stage;

typedef struct dfl_progress {
  dfl_stage stage;
  uint64_t received; /* Bytes of the body in hand. */
  uint64_t expected; /* The body's size; 0 while unknown. */
} dfl_progress;

/* DFL_NOT_FOUND once the demand has ended. */
DFL_API dfl_status dfl_progress_of(dfl_client* client, dfl_demand demand, dfl_progress* out);
/* Pauses every task (`all` non-zero) or those at or below `at_or_below`. */
DFL_API dfl_status dfl_pause(dfl_client* client, int all, int32_t at_or_below);
DFL_API dfl_status dfl_resume(dfl_client* client);

/* The client's metrics in the Prometheus text format; free it with
 * dfl_string_free. NULL on failure. */
DFL_API char* dfl_metrics_text(dfl_client* client);
DFL_API void dfl_string_free(char* text);

#ifdef __cplusplus
}
#endif

#endif /* DEMANDFLIGHT_BACKEND_C_API_H */
