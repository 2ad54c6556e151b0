/* next_probe2.c: libms_next_probe2.so, the second definition of probe_name (see next_probe1.c). */
__attribute__((visibility("default"))) const char *probe_name(void) { return "two"; }
