/*
 * banned.h: functions that invite buffer overflows or hidden state. Included
 * by every tenk source file (through the build's -include), so using one is
 * a compile error that points here. Use tk_strlcpy, snprintf, strbuf, or
 * strtok_r instead.
 */
#pragma once

/* Declare the real functions first, then hide them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BANNED(func) sorry_##func##_is_banned_in_tenk

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) BANNED(strncpy)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef strtok
#define strtok(x, y) BANNED(strtok)
#undef gets
#define gets(x) BANNED(gets)
