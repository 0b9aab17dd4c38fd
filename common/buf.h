/* The one growable text buffer, with a cap given at init (as curl's dynbuf):
 * an unbounded append is impossible by construction. */
#ifndef GQ_BUF_H
#define GQ_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "common/gq_error.h"

/* Caller-owned: gq_buf_init, appends, then gq_buf_finish or gq_buf_dispose.
 * Read data and len, never write them. data is NUL-terminated (NULL until
 * something is allocated); len never exceeds max.
 *
 * The first failing append is sticky: GQ_ELIMIT when the text would pass
 * max bytes (the NUL not counted), GQ_ENOMEM when memory cannot be had.
 * The failing append adds nothing, every later append does nothing and
 * returns the same code, and gq_buf_finish reports it. The text appended
 * before the failure stays readable at data until finish or dispose (for a
 * caller that keeps what fits, such as the start of an error body). So a caller may check each
 * append (when it must say which step failed) or only the finish (when one report is enough): the
 * append results carry no warn_unused_result for that reason.
 *
 * max 0 is a buffer that holds only the empty text: appending nothing
 * succeeds, any byte fails with GQ_ELIMIT. A zeroed gq_buf is that buffer,
 * so a forgotten init fails loudly instead of growing without bound. */
typedef struct gq_buf {
    char *data;
    size_t len;
    size_t alloc; /* bytes allocated at data */
    size_t max;   /* the cap */
    gq_code err;  /* the first failure, GQ_OK until then */
} gq_buf;

/* An empty buffer that will hold at most max bytes. Allocates nothing. */
void gq_buf_init(gq_buf *b, size_t max);

/* Append n bytes of p (p may be NULL when n is 0). GQ_OK, or the sticky
 * error (GQ_ELIMIT, GQ_ENOMEM): an append that does not fit whole adds
 * nothing. */
gq_code gq_buf_add(gq_buf *b, const void *p, size_t n);
/* Append the C string s. */
gq_code gq_buf_puts(gq_buf *b, const char *s);
/* printf-style, of any length up to the cap; a format error is GQ_EINVAL
 * (sticky too). */
gq_code gq_buf_printf(gq_buf *b, const char *fmt, ...) GQ_PRINTF(2, 3);
gq_code gq_buf_vprintf(gq_buf *b, const char *fmt, va_list ap) GQ_PRINTF(2, 0);
/* s as a JSON string with quotes (NULL: null), escaped exactly as json-c
 * writes it with JSON_C_TO_STRING_NOSLASHESCAPE, so hand-written and json-c
 * text agree byte for byte. All of it or nothing, as gq_buf_add. */
gq_code gq_buf_json_string(gq_buf *b, const char *s);

/* Record a failure of the caller's own step in writing the text (such as
 * building a piece of it) as the sticky error, unless one is already there;
 * returns the sticky error. code must not be GQ_OK. */
gq_code gq_buf_fail(gq_buf *b, gq_code code);

/* Empty the text, keeping the memory and the cap, to write the next piece
 * in the same place. An error stays: a reader that drains the buffer and
 * refills it still sees that something was lost. Start over with
 * gq_buf_dispose. */
void gq_buf_reset(gq_buf *b);

/* Hand the text over: *out (caller frees; "" when nothing was appended) and
 * *out_len (out_len may be NULL). On error (the sticky one, or GQ_ENOMEM
 * for the empty text) the outputs are untouched. Either way b is emptied,
 * keeping its cap, as after gq_buf_init. */
gq_code gq_buf_finish(gq_buf *b, char **out, size_t *out_len) GQ_WUR;

/* Free the text and forget an error; b keeps its cap. NULL is accepted. */
void gq_buf_dispose(gq_buf *b);

#endif
