# YAML/JSON loading for manifests (admit, config files).
gq_unit_test(test_yamljson unit/quota/test_yamljson.c)
gq_fuzz_target(yamljson ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_yamljson.c)
