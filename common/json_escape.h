/* JSON string escaping, one table for every writer of JSON text by hand
 * (gq_buf_json_string, the logger, the server's canned error bodies). */
#ifndef GQ_JSON_ESCAPE_H
#define GQ_JSON_ESCAPE_H

#include <stddef.h>

/* Longest escape of one byte: \u00XX. */
#define GQ_JSON_ESCAPE_MAX 6

/* The escape of byte c inside a JSON string exactly as json-c writes it
 * (\" \\ \b \f \n \r \t, \u00XX for other bytes below 0x20) into out, and
 * its length; 0 when c stands as itself (every other byte, UTF-8 included;
 * '/' is not escaped). c must not be NUL (the end of a C string). */
size_t gq_json_escape_byte(unsigned char c, char out[GQ_JSON_ESCAPE_MAX]);

/* Append s escaped (without quotes; NULL as nothing) into buf[*len..cap),
 * keeping a NUL; output is truncated between escapes, never overflowed.
 * DEL (0x7f) is escaped too, so untrusted text cannot reach a terminal raw
 * (log lines). */
void gq_json_escape_into(char *buf, size_t cap, size_t *len, const char *s);

#endif
