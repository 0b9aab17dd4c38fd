/* RFC 3339 times (Kubernetes' metav1.Time and MicroTime, the audit log, the
 * logger): one parser and one formatter for the project. Pure: times are
 * parameters, never read from a clock. */
#ifndef GQ_RFC3339_H
#define GQ_RFC3339_H

#include <stdint.h>

#include "common/gq_error.h"

/* Parse "2026-01-02T15:04:05Z", with optional fraction (truncated) and
 * numeric offset, into Unix seconds. */
gq_code gq_time_parse_rfc3339(const char *s, int64_t *out, gq_err *err) GQ_WUR;
/* The same, into Unix microseconds (fraction digits past the sixth truncated). */
gq_code gq_time_parse_rfc3339_us(const char *s, int64_t *out, gq_err *err) GQ_WUR;

/* Format Unix seconds as "2026-01-02T15:04:05Z" (years clamped to
 * 0000..9999). buf holds >= 32 bytes. */
#define GQ_RFC3339_MAX 32
void gq_time_format_rfc3339(int64_t t, char buf[GQ_RFC3339_MAX]);

/* Format Unix microseconds with frac_digits (3 or 6; anything else: none)
 * digits of fraction, rounded down: "2026-01-02T15:04:05.123456Z". */
void gq_time_format_rfc3339_frac(int64_t unix_us, int frac_digits, char buf[GQ_RFC3339_MAX]);

#endif
