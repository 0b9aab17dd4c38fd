/* Every rule check_layers.py keeps, broken once (test/layers.cmake). */
#include <curl/curl.h>
#include <time.h>

#include "policy.h"
#include "http/server.h"

/* strcpy( and time( in a comment are not calls */
static const char *text = "atoi(\"1\") in a string is not a call";

int bad(char *dst, const char *src)
{
    strcpy(dst, src);
    return (int)time(NULL) + (text[0] == 'a');
}
