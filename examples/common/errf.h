/* errf.h - the examples' one error-message helper (examples/common only, not part of the
   libraries): ex_errf formats a message into err (when err and errlen are given) and
   returns code, so a failing call reads `return ex_errf(err, errlen, CODE, "...", ...);`. */
#ifndef ATTNKIT_EX_ERRF_H
#define ATTNKIT_EX_ERRF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 4, 5)))
#endif
static int ex_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

#endif
