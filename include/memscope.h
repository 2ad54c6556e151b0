/* memscope.h: the annotation API for programs traced by memscope.
 *
 * Include it and link nothing: every function is a weak reference, resolved only when the
 * program runs under `memscope run` (the agent libmemscope.so defines them). Without the agent
 * the MEMSCOPE_* macros are no-ops that cost one test of a null pointer.
 *
 *   MEMSCOPE_START();   start recording (with --collect-mode=deferred)
 *   MEMSCOPE_STOP();    stop recording
 *
 * Each returns 0 on success and -1 when the agent is absent or cannot record. */
#ifndef MEMSCOPE_H
#define MEMSCOPE_H

#ifdef __cplusplus
extern "C" {
#endif

int memscope_start(void) __attribute__((weak));
int memscope_stop(void) __attribute__((weak));

#define MEMSCOPE_START() (memscope_start ? memscope_start() : -1)
#define MEMSCOPE_STOP() (memscope_stop ? memscope_stop() : -1)

#ifdef __cplusplus
}
#endif

#endif
