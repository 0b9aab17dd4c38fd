# Pod GPU cost: table over test/data/pods/*.json.
gq_unit_test(test_podcost test_podcost.c)
