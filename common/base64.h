/* Base64 (RFC 4648 §4, standard alphabet, padded): the encoding Kubernetes
 * uses for []byte fields such as AdmissionResponse.patch. */
#ifndef GQ_BASE64_H
#define GQ_BASE64_H

#include <stddef.h>

#include "common/gq_error.h"

/* Encode in[0..len) as NUL-terminated text. Caller frees *out with free();
 * *out_len excludes the NUL. GQ_ERANGE if the size would overflow. */
gq_code gq_base64_encode(const void *in, size_t len, char **out, size_t *out_len) GQ_WUR;

/* Decode padded standard base64 (no whitespace, no URL alphabet). The result
 * is NUL-terminated for convenience; *out_len excludes the NUL. GQ_EINVAL for
 * a bad character, length or padding (including non-zero padding bits). */
gq_code gq_base64_decode(const char *in, size_t len, unsigned char **out, size_t *out_len) GQ_WUR;

#endif
