# Quantities: unit tests, the canonical-form table, and the parser fuzz target.
gq_unit_test(test_quantity test_quantity.c)

add_executable(quantity_table quantity_table.c)
target_link_libraries(quantity_table PRIVATE gq_core)
target_compile_definitions(quantity_table PRIVATE GQ_TEST_DATA="${GQ_TEST_DATA}")
add_test(NAME quantity_table COMMAND quantity_table)
set_tests_properties(quantity_table PROPERTIES PASS_REGULAR_EXPRESSION "^[0-9]+ passed, 0 failed\n$")
# The runner must notice a wrong row (and say so in its summary).
add_test(NAME quantity_table_detects_mismatch
         COMMAND quantity_table ${GQ_TEST_DATA}/quantity_bad.tsv)
set_tests_properties(quantity_table_detects_mismatch PROPERTIES
                     PASS_REGULAR_EXPRESSION "\n1 passed, 3 failed\n$")
add_test(NAME quantity_table_missing_file COMMAND quantity_table ${GQ_TEST_DATA}/no-such-file.tsv)
set_tests_properties(quantity_table_missing_file PROPERTIES WILL_FAIL TRUE)

gq_fuzz_target(quantity fuzz/fuzz_quantity.c)
