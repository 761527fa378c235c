/* An idle process that grows on demand: a hoarding burst or a regrowth, as the scan sees
 * it. usage: burst KIB
 * Touches KIB of anonymous memory, prints "ready", then for each line "N" on stdin
 * touches N more MiB, prints "grown", and sleeps again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void touch(size_t bytes) {
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(1);
    memset(p, 1, bytes);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    touch((size_t)atol(argv[1]) * 1024);
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        touch((size_t)atol(line) << 20);
        printf("grown\n");
        fflush(stdout);
    }
    for (;;) pause();
}
