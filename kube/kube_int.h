/* Internal helpers shared by the kube/ sources; not part of the public API. */
#ifndef KUBE_INT_H
#define KUBE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kube/kube.h"

/* A growable byte buffer with a hard cap; data stays NUL-terminated. */
typedef struct kube_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max; /* GQ_ELIMIT beyond this many bytes */
} kube_buf;

void kube_buf_init(kube_buf *b, size_t max);
void kube_buf_dispose(kube_buf *b);
gq_code kube_buf_append(kube_buf *b, const void *p, size_t n) GQ_WUR;
gq_code kube_buf_appends(kube_buf *b, const char *s) GQ_WUR;

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
