/* Helpers the libFuzzer targets share (not part of libplena): the input as
 * a NUL-terminated copy, and as a file for the readers that take a path.
 * Each target process writes its own file (pid in the name). */
#ifndef PLENA_FUZZ_UTIL_H
#define PLENA_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input in a file named `name` under a per-process scratch directory
 * (created once); returns the path (static storage). */
static inline const char *fuzz_file(const char *name, const uint8_t *data, size_t size)
{
    static char dir[256];
    static char path[512];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/plena_fuzz_%ld", t && *t ? t : "/tmp", (long)getpid());
        char cmd[300];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        if (system(cmd)) abort();
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f)) abort();
    return path;
}

#endif
