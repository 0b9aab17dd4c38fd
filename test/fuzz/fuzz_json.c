/* Fuzz the shared JSON parser against json-c's own: whatever gq_json_parse
 * accepts, json-c in strict mode reads to an equal value; pruning never
 * changes whether a text is accepted or why it is refused. Inputs with \u
 * escapes (lone surrogates are decoded differently on purpose) or integers
 * beyond 64 bits (json-c clamps them) are left out of the comparison. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quota/jsonpatch.h"
#include "common/jsonutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool finite_all(json_object *v)
{
    switch (json_object_get_type(v)) {
    case json_type_double:
        return isfinite(json_object_get_double(v));
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(v); i++)
            if (!finite_all(json_object_array_get_idx(v, i)))
                return false;
        return true;
    case json_type_object: {
        json_object_object_foreach(v, k, m)
        {
            (void)k;
            if (!finite_all(m))
                return false;
        }
        return true;
    }
    default:
        return true;
    }
}

/* Something json-c and we read differently by design. */
static bool comparable(const char *s, size_t n)
{
    size_t digits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n && s[i + 1] == 'u')
            return false;
        if (s[i] == '\0')
            return false;
        digits = s[i] >= '0' && s[i] <= '9' ? digits + 1 : 0;
        if (digits > 15)
            return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const skip[] = {"a", "*/b", "c/0", "*/*/d"};
    const char *text = (const char *)data;
    json_object *ours = NULL, *pruned = NULL;
    gq_err e1, e2;
    gq_code rc = gq_json_parse(text, size, 16, &ours, &e1);
    gq_code rp = gq_json_parse_pruned(text, size, 16, skip, 4, &pruned, &e2);
    /* Pruning changes no verdict, except that a pruned subtree may nest
     * deeper than max_depth (it is checked without recursion): where the
     * whole parse stopped at the depth cap, the pruned one goes on and may
     * succeed or stop at a later error. Text the whole parse accepts, the
     * pruned one accepts too. */
    bool deep = rc == GQ_ELIMIT && !strncmp(e1.msg, "JSON nests deeper", 17);
    if ((rc == GQ_OK && rp != GQ_OK) ||
        (rc != GQ_OK && !deep && (rp == GQ_OK || rc != rp || strcmp(e1.msg, e2.msg))))
        abort();
    json_object_put(pruned);

    if (size && size < 1 << 20 && comparable(text, size)) {
        json_tokener *tok = json_tokener_new_ex(17);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        json_object *theirs = json_tokener_parse_ex(tok, text, (int)size);
        enum json_tokener_error je = json_tokener_get_error(tok);
        if (je == json_tokener_continue) {
            theirs = json_tokener_parse_ex(tok, "", 1);
            je = json_tokener_get_error(tok);
        } else if (je == json_tokener_success) {
            for (size_t i = json_tokener_get_parse_end(tok); i < size; i++)
                if (!strchr(" \t\n\r", text[i]))
                    je = json_tokener_error_parse_unexpected;
        }
        /* Whatever we accept json-c reads to the same value (the other way
         * round does not hold: json-c also takes -.25, 01, raw control
         * characters in strings, none of which is JSON). */
        if (rc == GQ_OK && finite_all(ours) &&
            (je != json_tokener_success || !gq_json_equal(ours, theirs)))
            abort();
        json_object_put(theirs);
        json_tokener_free(tok);
    }
    json_object_put(ours);
    return 0;
}
