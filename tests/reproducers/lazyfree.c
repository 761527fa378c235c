/* Memory given back with MADV_FREE, as jemalloc, mimalloc and Go 1.12-1.15 give it back.
 * usage: lazyfree MIB KEEP_MIB
 * Maps MIB MiB of private anonymous memory, writes every page, gives back all but the
 * first KEEP_MIB MiB with madvise(MADV_FREE), checks that the kernel counts every freed
 * page as LazyFree (/proc/self/smaps_rollup), prints "ready FREED_BYTES" and waits. The
 * freed pages stay resident until memory pressure reclaims them;
 * on a line on stdin it writes every freed page again (they are the process's again, no
 * longer lazily freed), prints "ready 0" and waits.
 * Exits 5 with the kernel's count on stderr if the kernel does not count them all. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static long lazy_free_kib(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "LazyFree: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    /* One CPU for the whole run. A page faulted in waits in a per-CPU batch (31 pages on
     * 6.x, 15 before) until it is on an LRU list, MADV_FREE skips a page not on one, and
     * it drains only its own CPU's batch first: moved to another CPU after writing, up to
     * 30 of the last pages written stay the program's (seen here: 3 to 30 pages short). */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return 6;
    size_t mib = strtoul(argv[1], 0, 10), keep = strtoul(argv[2], 0, 10);
    if (keep > mib) return 2;
    size_t len = mib << 20, kept = keep << 20;
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *spare = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || spare == MAP_FAILED) return 3;
    /* Small pages only: a huge page given back in part is split, and counted apart. */
    madvise(p, len, MADV_NOHUGEPAGE);
    memset(p, 1, len);
    if (madvise(p + kept, len - kept, MADV_FREE) != 0) return 4;
    /* Freed pages are marked lazily free through this CPU's batch too, the last ones only
     * when it is drained (12 pages short of 48 MiB here): MADV_FREE of a spare page
     * drains it before it starts. */
    if (madvise(spare, 4096, MADV_FREE) != 0) return 4;
    long kib = lazy_free_kib();
    if (kib != (long)((len - kept) >> 10)) {
        fprintf(stderr, "lazyfree: the kernel counts %ld kB of %zu kB freed as LazyFree\n",
                kib, (len - kept) >> 10);
        return 5;
    }
    printf("ready %zu\n", len - kept);
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        for (size_t i = kept; i < len; i += 4096) p[i] = 2;
        printf("ready 0\n");
        fflush(stdout);
    }
    for (;;) pause();
}
