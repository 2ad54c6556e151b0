/* term_text.h: text that came from the traced program (names of owners, pools, ranges, marks,
 * ops, threads, executables, call sites), made safe to print on a terminal. The one rule for
 * every text output meant for a terminal (the analyses' text reports, run's summary, the CLI's
 * messages): control characters (C0, DEL, C1) and bytes that are not UTF-8 are written as
 * escapes (\n, \r, \t, \xNN, \u0080..\u009f), so that a name cannot change the window title,
 * clear the screen, write the clipboard (OSC 52) or forge a line of the report. Not for JSON,
 * CSV or databases, which carry the exact bytes. */
#ifndef MS_TERM_TEXT_H
#define MS_TERM_TEXT_H

#include <stddef.h>

/* Writes s, escaped, into out (len >= 4 bytes, always NUL-terminated; a text cut short ends in
 * "..."). Returns the length written. */
size_t ms_term_escape(char *out, size_t len, const char *s);

/* s itself when it needs no escape (the common case), else its escaped form in one of 8
 * buffers of this thread used in turn (valid until 8 more calls: enough for the arguments of
 * one printf), cut at about 4 KiB. NULL for NULL. */
const char *ms_term_text(const char *s);

#endif
