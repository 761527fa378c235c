/* An idle process that grows on demand: a hoarding burst or a regrowth, as the scan sees
 * it. usage: burst KIB
 * Touches KIB of anonymous memory, prints "ready", then for each line on stdin: "N"
 * touches N more MiB and prints "grown"; "page" pushes all of it out to swap
 * (MADV_PAGEOUT) and prints "paged". It sleeps between lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static struct { char *p; size_t len; } regions[256];
static int nregions;

static void touch(size_t bytes) {
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || nregions == 256) exit(1);
    memset(p, 1, bytes);
    regions[nregions].p = p;
    regions[nregions++].len = bytes;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    touch((size_t)atol(argv[1]) * 1024);
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "page", 4) == 0) {
            for (int i = 0; i < nregions; i++)
                if (madvise(regions[i].p, regions[i].len, MADV_PAGEOUT)) exit(1);
            printf("paged\n");
        } else {
            touch((size_t)atol(line) << 20);
            printf("grown\n");
        }
        fflush(stdout);
    }
    for (;;) pause();
}
