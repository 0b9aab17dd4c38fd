#include <stdio.h>

void bad(char *buf)
{
    sprintf(buf, "%d", 1);
}
