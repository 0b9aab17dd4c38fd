# Configuration: embedded defaults, catalog, lookups.
gq_unit_test(test_config_catalog test_config_catalog.c)
