/* gpuquota — one result type for every layer.
 *
 * Functions return a gq_code; detail goes into a caller-supplied gq_err
 * (code + bounded message). Filling a gq_err never allocates, so reporting
 * out-of-memory cannot fail. Lower layers propagate codes unchanged; only the
 * top of each shell translates them (HTTP status, AdmissionReview denial,
 * requeue). */
#ifndef GQ_ERROR_H
#define GQ_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#if defined(__GNUC__)
#define GQ_WUR __attribute__((warn_unused_result))
#define GQ_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define GQ_WUR
#define GQ_PRINTF(fmt, args)
#endif

/* Append-only: never renumber, never reuse a value. */
typedef enum gq_code {
    GQ_OK = 0,
    GQ_ENOMEM = 1,         /* allocation failed */
    GQ_EINVAL = 2,         /* malformed input (syntax, wrong type, missing field) */
    GQ_ERANGE = 3,         /* value out of range or arithmetic overflow */
    GQ_ENOTFOUND = 4,      /* named thing does not exist */
    GQ_EDENIED = 5,        /* policy says no (quota, limit range, tamper) */
    GQ_EIO = 6,            /* file or socket I/O failed */
    GQ_ECONFLICT = 7,      /* optimistic concurrency conflict (HTTP 409) */
    GQ_ETIMEOUT = 8,       /* deadline passed */
    GQ_EHTTP = 9,          /* remote answered with an unexpected HTTP status */
    GQ_ETLS = 10,          /* TLS or certificate failure */
    GQ_EUNSUPPORTED = 11,  /* valid input that this configuration cannot serve */
    GQ_EEXISTS = 12,       /* already exists (HTTP 409 AlreadyExists) */
    GQ_EGONE = 13,         /* resourceVersion too old (HTTP 410) */
    GQ_EUNAUTHORIZED = 14, /* HTTP 401 */
    GQ_ELIMIT = 15,        /* input larger than a hard cap */
    GQ_EBUSY = 16,         /* a limit shared with other requests is reached for now */
    GQ_CODE_COUNT_         /* keep last */
} gq_code;

#define GQ_ERR_MSG_MAX 512

typedef struct gq_err {
    gq_code code;
    char msg[GQ_ERR_MSG_MAX];
} gq_err;

/* Static description of a code; never NULL. */
const char *gq_strerror(gq_code code);

/* Clear an error record (code GQ_OK, empty message). NULL is accepted. */
void gq_err_clear(gq_err *err);

/* Record code and a printf-formatted message (truncated to fit) in err, which
 * may be NULL. Returns code so callers can write `return gq_err_set(...)`. */
gq_code gq_err_set(gq_err *err, gq_code code, const char *fmt, ...) GQ_PRINTF(3, 4);
/* gq_err_set with the arguments as a va_list (for functions that take a
 * format of their own). */
gq_code gq_err_vset(gq_err *err, gq_code code, const char *fmt, va_list ap) GQ_PRINTF(3, 0);

/* gq_err_oom(err): what every allocation
 * failure reports. Returns GQ_ENOMEM. */
gq_code gq_err_oom(gq_err *err);

/* Prepend "prefix: " to an existing message (e.g. a file name or a container),
 * keeping the code. NULL err is accepted. */
void gq_err_prefix(gq_err *err, const char *fmt, ...) GQ_PRINTF(2, 3);

#endif
