#include <microhttpd.h>

#include "controller/ctl.h"
#include "quota/policy.h"
