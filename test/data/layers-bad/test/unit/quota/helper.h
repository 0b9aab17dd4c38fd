/* A test header beside its test: included by its bare name, no problem. */
