/* glibc heaps with a known amount of free memory, to check the heap walk against glibc's
 * own count (mallinfo2().fordblks, printed at the same moment).
 * usage: heap MODE LIVE_MIB FREED_MIB [BLOCK_BYTES]
 *   main:   allocate LIVE+FREED MiB in 64 KiB blocks (below the mmap threshold, so from the
 *           brk heap), touch them, free FREED MiB of them spread among the live ones (the
 *           live ones pin the freed memory: the heap cannot shrink);
 *   thread: the same in a worker thread, so in its own arena's heaps; the thread exits
 *           and its arena stays;
 *   trim:   main, then malloc_trim(0): the free chunks stay, their pages are returned;
 *   churn:  main, then allocates and frees small blocks in a tight loop forever, so the
 *           heap's headers and free lists change while they are read;
 *   busy:   churn with about 20 us of work after each allocation, as a busy server
 *           (50,000 allocations a second);
 *   settle: thread, whose worker then churns in its own arena for 8 s (a service
 *           warming up) before it exits, so the heap changes under every walk of its
 *           first seconds and then holds still;
 *   below:  main, but the FREED MiB freed are the first allocated: one free range below
 *           LIVE MiB of live blocks (where no trim threshold reaches);
 *   top:    main after a block of just under 32 MiB (mmapped) is freed, which raises glibc's dynamic
 *           mmap threshold to 32 MiB and its trim threshold to 64 MiB; the FREED MiB
 *           freed are the last allocated, so they end the heap (its top chunk) and stay
 *           while FREED is below 64.
 *   grow:   main, then each line "N" on stdin touches N MiB more outside the heap (mmap),
 *           as a working set growing past a limit would, and prints "grown" (read(2),
 *           never stdio, so the heap is left as glibc counted it).
 * BLOCK_BYTES (default 65472) sets the block size; blocks above glibc's mmap threshold
 * (128 KiB) need MALLOC_MMAP_THRESHOLD_ raised to come from the heap.
 * Prints "ready FORDBLKS", then waits (blocked.h: MEMBLOAT_WAIT_IN, and what it says once
 * woken; the live blocks are what it checks) or churns. Build with -fno-builtin-malloc
 * -fno-builtin-free -pthread. */
#include "blocked.h"
#include "mallinfo.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static size_t live_mib, freed_mib, block = 65536 - 64;
/* Which blocks are freed: spread among the live ones, the first ones, or the last ones. */
static enum { SPREAD, FIRST, LAST } freed_order = SPREAD;

static void *fill(void *unused) {
    (void)unused;
    size_t per_mib = (1 << 20) / (block + 16);
    size_t n = (live_mib + freed_mib) * per_mib, nf = freed_mib * per_mib;
    void **b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        b[i] = malloc(block);
        memset(b[i], (int)(1 + i % 251), block);
    }
    for (size_t i = 0; i < nf; i++) {
        size_t k = freed_order == FIRST ? i : freed_order == LAST ? n - 1 - i : i * n / nf;
        free(b[k]);
        b[k] = 0;
    }
    for (size_t i = 0; i < n; i++) live_add(b[i], block);
    return b;
}

/* A ring of 256 blocks of up to 16 KiB, each filled when allocated, as a busy program uses
 * what it allocates: at most 4 MiB moves between free and used. */
static void churn_once(void) {
    static __thread void *ring[256];
    static __thread unsigned long i, r = 1;
    r = r * 6364136223846793005UL + 1442695040888963407UL;
    size_t n = 16 + (r >> 33) % 16384;
    free(ring[i % 256]);
    ring[i % 256] = malloc(n);
    memset(ring[i % 256], (int)i, n);
    i++;
}

static void *fill_then_settle(void *unused) {
    void *b = fill(unused);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        for (int k = 0; k < 1000; k++) churn_once();
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec < 8);
    return b;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) return 2;
    if (argc == 5) block = strtoul(argv[4], 0, 10);
    const char *mode = argv[1];
    live_mib = strtoul(argv[2], 0, 10);
    freed_mib = strtoul(argv[3], 0, 10);
    if (strcmp(mode, "below") == 0) freed_order = FIRST;
    if (strcmp(mode, "top") == 0) {
        freed_order = LAST;
        free(malloc((32 << 20) - 8192));
    }
    if (strcmp(mode, "thread") == 0 || strcmp(mode, "settle") == 0) {
        pthread_t t;
        pthread_create(&t, 0, strcmp(mode, "settle") == 0 ? fill_then_settle : fill, 0);
        pthread_join(t, 0);
    } else {
        fill(0);
    }
    if (strcmp(mode, "trim") == 0) malloc_trim(0);
    unsigned long long fordblks = glibc_mallinfo().fordblks;
    printf("ready %llu\n", fordblks);
    fflush(stdout);
    int busy = strcmp(mode, "busy") == 0;
    if (strcmp(mode, "churn") == 0 || busy) {
        for (;;) {
            churn_once();
            if (busy) {
                struct timespec a, b;
                clock_gettime(CLOCK_MONOTONIC, &a);
                do
                    clock_gettime(CLOCK_MONOTONIC, &b);
                while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 20000);
            }
        }
    }
    if (strcmp(mode, "grow") == 0) {
        char line[32];
        ssize_t got;
        while ((got = read(0, line, sizeof line - 1)) > 0) {
            line[got] = 0;
            size_t bytes = (size_t)atol(line) << 20;
            char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) memset(p, 1, bytes);
            static const char grown[] = "grown\n";
            write(1, grown, sizeof grown - 1);
        }
    }
    wait_forever();
}
