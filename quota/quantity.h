/* Kubernetes resource.Quantity, exactly.
 *
 * Grammar (k8s.io/apimachinery/pkg/api/resource):
 *   <quantity> ::= <signedNumber><suffix>
 *   <signedNumber> ::= [+-] <digits> | [+-] <digits>.<digits> | [+-] <digits>. | [+-] .<digits>
 *   <suffix> ::= <binarySI> | <decimalSI> | <decimalExponent>
 *   <binarySI> ::= Ki | Mi | Gi | Ti | Pi | Ei
 *   <decimalSI> ::= n | u | m | "" | k | M | G | T | P | E
 *   <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
 * Values are rounded up (away from zero) to nano (10^-9) precision. A
 * quantity remembers the format it was written in, which decides its
 * canonical form.
 *
 * Representation: value = mant * 10^exp10, with exp10 >= -9 and mant an
 * int64. A value that cannot be held that way (or, in binary SI or for the
 * byte helpers below, does not fit int64) is GQ_ERANGE: nothing ever wraps or
 * is capped silently. Results of the functions below are normalised (no
 * trailing zero in mant; zero is {0, 0}). Treat the fields as read-only;
 * build quantities with the functions below. Where this differs from
 * Kubernetes' ParseQuantity (which caps or accepts more): docs/quantity.md. */
#ifndef GQ_QUANTITY_H
#define GQ_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/gq_error.h"

typedef enum gq_qformat {
    GQ_QFMT_DECIMAL_SI = 0,  /* m, "", k, M, G, T, P, E */
    GQ_QFMT_BINARY_SI = 1,   /* Ki, Mi, Gi, Ti, Pi, Ei */
    GQ_QFMT_DECIMAL_EXP = 2, /* e3, E-6, ... */
} gq_qformat;

typedef struct gq_quantity {
    int64_t mant;
    int32_t exp10;
    gq_qformat format;
} gq_quantity;

/* Longest canonical form, with its NUL. */
#define GQ_QUANTITY_STR_MAX 48

/* Parse s[0..len) (no NUL needed, no whitespace allowed). On error out is
 * untouched and err says what is wrong, quoting (a bounded, escaped prefix of)
 * the input and naming the accepted forms: GQ_EINVAL for syntax (including a
 * NULL or empty s), GQ_ERANGE for values that cannot be held, GQ_ELIMIT for
 * inputs longer than 4096 bytes. err may be NULL. */
gq_code gq_quantity_parse(const char *s, size_t len, gq_quantity *out, gq_err *err) GQ_WUR;

/* Canonical form, as Kubernetes' Quantity.String() prints it: "1536Mi" for
 * 1.5Gi, "1500m" for 1.5, "0" for zero. buf must hold GQ_QUANTITY_STR_MAX. */
void gq_quantity_format(const gq_quantity *q, char buf[GQ_QUANTITY_STR_MAX]);

/* -1, 0, 1 as a is less than, equal to, greater than b (by value). */
int gq_quantity_cmp(const gq_quantity *a, const gq_quantity *b);

bool gq_quantity_is_zero(const gq_quantity *q);
bool gq_quantity_is_negative(const gq_quantity *q);

/* a + b and a - b, exact; the result keeps a's format (b's when a is zero,
 * as Quantity.Add/Sub do). GQ_ERANGE when the exact result cannot be held. */
gq_code gq_quantity_add(const gq_quantity *a, const gq_quantity *b, gq_quantity *out) GQ_WUR;
gq_code gq_quantity_sub(const gq_quantity *a, const gq_quantity *b, gq_quantity *out) GQ_WUR;

/* q * num / den rounded away from zero to 1n (so a later
 * gq_quantity_to_int64_ceil gives the ceiling of the exact product). Keeps
 * q's format. GQ_EINVAL if den <= 0, GQ_ERANGE on overflow. */
gq_code gq_quantity_scale_ceil(const gq_quantity *q, int64_t num, int64_t den,
                               gq_quantity *out) GQ_WUR;

/* Value rounded up to a whole number (bytes, whole GPUs); negative values
 * round away from zero, like Quantity.Value(). GQ_ERANGE if it does not fit
 * int64; *out is written only on success. */
gq_code gq_quantity_to_int64_ceil(const gq_quantity *q, int64_t *out) GQ_WUR;

/* Value in thousandths, rounded up ("500m" -> 500, "0.25" -> 250, "1n" -> 1;
 * away from zero like Quantity.MilliValue()). GQ_ERANGE if it does not fit
 * int64; *out is written only on success. */
gq_code gq_quantity_to_milli_ceil(const gq_quantity *q, int64_t *out) GQ_WUR;

/* True when q is a whole number (no fractional part). */
bool gq_quantity_is_integer(const gq_quantity *q);

/* A quantity holding the integer v (any int64, INT64_MIN included) in the
 * given format. */
gq_quantity gq_quantity_from_int64(int64_t v, gq_qformat format);

/* Convenience: canonical binary-SI text for a byte count ("20Gi", "1536Mi"). */
void gq_format_bytes(int64_t bytes, char buf[GQ_QUANTITY_STR_MAX]);

#endif
