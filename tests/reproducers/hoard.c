/* Allocator hoarding (glibc dynamic mmap threshold).
 * usage: hoard ROUNDS PIN TRIM
 * Each round mallocs 256 blocks of (random() % 2048) pages, touches them, optionally
 * allocates a 1 MiB "pin" above them, and frees the blocks. After the first round glibc
 * has raised its mmap threshold, so later rounds come from the brk heap, which the pin
 * keeps from shrinking. Prints "ready FREE_HELD" (mallinfo2 fordblks: freed bytes the
 * allocator still holds), then waits (blocked.h: MEMBLOAT_WAIT_IN, and what it says once
 * woken). Build with -fno-builtin-malloc -fno-builtin-free. */
#include "blocked.h"
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    int rounds = atoi(argv[1]), pin = atoi(argv[2]), trim = atoi(argv[3]);
    static void *blocks[256];
    srandom(42);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 256; i++) {
            size_t n = (size_t)(random() % 2048) * 4096;
            blocks[i] = malloc(n);
            if (blocks[i]) memset(blocks[i], 1, n);
        }
        if (pin) {
            char *p = malloc(1 << 20);
            if (p) memset(p, 1 + r, 1 << 20);
            live_add(p, 1 << 20);
        }
        for (int i = 0; i < 256; i++) free(blocks[i]);
    }
    if (trim) malloc_trim(0);
    struct mallinfo2 mi = mallinfo2();
    printf("ready %zu\n", mi.fordblks);
    fflush(stdout);
    wait_forever();
}
