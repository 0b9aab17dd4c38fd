#include "quota/a.h"
#include "quota/b.h"

static int short_one(void)
{
    return 0;
}
