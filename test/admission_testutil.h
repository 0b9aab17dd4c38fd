/* Helpers shared by the admission tests (cmocka assertions inside). */
#ifndef ADMISSION_TESTUTIL_H
#define ADMISSION_TESTUTIL_H

#include <stddef.h>

#include <json-c/json.h>

/* The whole of test/data/NAME, NUL-terminated; caller frees. */
char *at_read_data(const char *name, size_t *len);

/* test/data/NAME parsed as JSON; caller puts. */
json_object *at_load_json(const char *name);

/* The decoded response.patch of an encoded AdmissionReview, NUL-terminated
 * (caller frees); asserts patchType is JSONPatch. */
char *at_response_patch(const char *review, size_t len, size_t *patch_len);

#endif
