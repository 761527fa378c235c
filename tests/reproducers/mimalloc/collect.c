/* A C program on mimalloc as a shared library it is linked against (built to override
 * malloc, as distributions build libmimalloc.so): it keeps freed memory in mimalloc's
 * heap, and asks mimalloc to give it back.
 * usage: mimalloc-collect SEED MIB KEEP_PERCENT
 * Allocates blocks of random sizes (16 B to 8 MiB, by SEED) with malloc until it has MIB
 * MiB, touches every page, frees all but KEEP_PERCENT % of them in random order, prints
 * "ready version=V" (mi_version()), then waits for lines on stdin: `collect` runs
 * mi_collect(true) and prints the line again. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mi_collect(bool force);
int mi_version(void);

static unsigned long long state;

static unsigned long long next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static void ready(void) {
    int v = mi_version();
    if (v >= 10000)
        printf("ready version=%d.%d.%d\n", v / 10000, v / 100 % 100, v % 100);
    else
        printf("ready version=%d.%d.%d\n", v / 100, v / 10 % 10, v % 10);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    state = strtoull(argv[1], 0, 10) * 0x9e3779b97f4a7c15ULL | 1;
    size_t mib = strtoull(argv[2], 0, 10), keep = strtoull(argv[3], 0, 10);
    size_t cap = 1 << 20, n = 0, total = 0;
    char **blocks = malloc(cap * sizeof *blocks);
    if (!blocks) return 1;
    while (total < mib << 20 && n < cap) {
        size_t size = (size_t)16 << (next() % 19);
        size += next() % size;
        char *b = malloc(size);
        if (!b) return 1;
        for (size_t i = 0; i < size; i += 4096) b[i] = 1;
        blocks[n++] = b;
        total += size;
    }
    for (size_t left = n; left > n * keep / 100; left--) {
        size_t j = next() % left;
        free(blocks[j]);
        blocks[j] = blocks[left - 1];
    }
    ready();
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "collect", 7) == 0) mi_collect(true);
        ready();
    }
    return 0;
}
