/* Internal helpers shared by the kube/ sources; not part of the public API. */
#ifndef KUBE_INT_H
#define KUBE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "kube/kube.h"

/* Read a whole file (at most max bytes) into a NUL-terminated malloc'ed buffer. */
gq_code kube_read_file(const char *path, size_t max, char **out, size_t *len, gq_err *err) GQ_WUR;

/* Standard padded base64, CR and LF ignored (as in kubeconfig -data). */
gq_code kube_base64_decode(const char *s, size_t len, unsigned char **out, size_t *outlen) GQ_WUR;

/* Monotonic and wall clocks in milliseconds / microseconds. */
int64_t kube_mono_ms(void);
int64_t kube_wall_us(void);
/* Sleep up to ms, returning early (non-zero) when *stop becomes non-zero. */
int kube_sleep_ms(long ms, const atomic_int *stop);

/* Deep-copy helper for configs. */
gq_code kube_config_copy(const kube_config *src, kube_config **out) GQ_WUR;

#endif
