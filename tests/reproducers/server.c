/* A heap shaped like a long-running server's: worker threads, each in its own arena, keep
 * small live objects (64-600 bytes) with larger blocks between them that they freed, so
 * the free memory is pinned in many holes across many 64 MiB heaps.
 *
 *   server THREADS MIB_PER_THREAD LIVE_PER_HOLE HOLE_BYTES
 *
 * Each thread repeats, until it has allocated MIB_PER_THREAD: LIVE_PER_HOLE small objects,
 * then one HOLE_BYTES block; then it frees the blocks and parks. LIVE_PER_HOLE 0 frees
 * nothing (live data only). Seed 001's shape at this machine's scale is 16 threads of
 * 410 MiB with 128 objects per 64 KiB hole: ~100 heaps, 8 million chunks, 64,000 holes.
 * Prints "ready FORDBLKS" (mallinfo2, or mallinfo before glibc 2.33) once every thread is
 * done, with write(2) only, and holds still. Build with -fno-builtin-malloc
 * -fno-builtin-free -pthread. */
#define _GNU_SOURCE
#include "mallinfo.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t mib, live_per_hole, hole;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int working;

static void *worker(void *arg) {
    uint64_t r = (uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
    size_t budget = mib << 20, used = 0, n = 0, cap = 1024;
    void **holes = malloc(cap * sizeof *holes);
    while (used < budget) {
        for (size_t i = 0; i < live_per_hole; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            size_t sz = 64 + r % 537;
            char *p = malloc(sz);
            p[0] = 1;
            used += sz + 16;
        }
        char *h = malloc(hole);
        memset(h, 2, hole);
        used += hole + 16;
        if (n == cap)
            holes = realloc(holes, (cap *= 2) * sizeof *holes);
        holes[n++] = h;
    }
    if (live_per_hole > 0)
        for (size_t i = 0; i < n; i++)
            free(holes[i]);
    pthread_mutex_lock(&lock);
    working--;
    pthread_cond_broadcast(&cond);
    for (;;)
        pthread_cond_wait(&cond, &lock);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5)
        return 2;
    int threads = atoi(argv[1]);
    mib = strtoul(argv[2], 0, 10);
    live_per_hole = strtoul(argv[3], 0, 10);
    hole = strtoul(argv[4], 0, 10);
    working = threads;
    for (int t = 0; t < threads; t++) {
        pthread_t id;
        if (pthread_create(&id, NULL, worker, (void *)(uintptr_t)(t + 1)) != 0)
            return 1;
    }
    pthread_mutex_lock(&lock);
    while (working > 0)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    unsigned long long fordblks = glibc_mallinfo().fordblks;
    char line[64];
    int len = snprintf(line, sizeof line, "ready %llu\n", fordblks);
    if (write(1, line, len) < 0)
        return 1;
    for (;;)
        pause();
}
