/* ldd_util.h — `svrun ldd -r` over a list of packaged binaries (ldd_util.c). */
#ifndef LDD_UTIL_H
#define LDD_UTIL_H

/* Expects each /usr/bin/<prog> to load on the drop-ins with every symbol resolved. */
void apps_ldd_check(const char *const progs[]);

#endif
