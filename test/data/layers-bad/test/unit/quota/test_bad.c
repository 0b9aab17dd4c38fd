#include "quota/policy.h"
#include "helper.h"
#include "testjson.h"
