# Quantities: unit tests, the canonical-form table, and the parser fuzz target.
gq_unit_test(test_quantity unit/quota/test_quantity.c)

add_executable(quantity_table unit/quota/quantity_table.c)
target_link_libraries(quantity_table PRIVATE gq_core)
target_compile_definitions(quantity_table PRIVATE GQ_TEST_DATA="${GQ_TEST_DATA}")
gq_output_test(quantity_table "^[1-9][0-9]* passed, 0 failed\n$" COMMAND $<TARGET_FILE:quantity_table>)
# The runner must notice a wrong row (say so in its summary, and exit 1).
add_test(NAME quantity_table_detects_mismatch
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 1 1 "^1 passed, 3 failed$"
                 $<TARGET_FILE:quantity_table> ${GQ_TEST_DATA}/quantity_bad.tsv)
add_test(NAME quantity_table_missing_file COMMAND quantity_table ${GQ_TEST_DATA}/no-such-file.tsv)
set_tests_properties(quantity_table_missing_file PROPERTIES WILL_FAIL TRUE)

gq_fuzz_target(quantity fuzz/fuzz_quantity.c)
