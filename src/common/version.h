/* The library's version, from project(plena VERSION ...) in CMakeLists.txt
 * (the one place it is written). */
#ifndef PLENA_COMMON_VERSION_H
#define PLENA_COMMON_VERSION_H

/* "MAJOR.MINOR.PATCH" of the libplena the program runs with. */
const char *plena_version(void);

#endif
