/* A cli/ header declaring a function with another layer's prefix. */
int gq_misnamed(void);
int cli_named(void);
