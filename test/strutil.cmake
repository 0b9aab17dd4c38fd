# Small string utilities of the core (quota/strutil.h).
gq_unit_test(test_strutil test_strutil.c)
