/* Half of an include circle (test/code_stats.py). */
#include "quota/b.h"
