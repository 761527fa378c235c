/* Memory given back with MADV_FREE, as jemalloc, mimalloc and Go 1.12-1.15 give it back.
 * usage: lazyfree MIB KEEP_MIB
 * Maps MIB MiB of private anonymous memory, writes every page, gives back all but the
 * first KEEP_MIB MiB with madvise(MADV_FREE), prints "ready FREED_BYTES" and waits. The
 * freed pages stay resident (the kernel's LazyFree, all of it once the per-CPU batches are
 * drained, as here) until memory pressure reclaims them;
 * on a line on stdin it writes every freed page again (they are the process's again, no
 * longer lazily freed), prints "ready 0" and waits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    size_t mib = strtoul(argv[1], 0, 10), keep = strtoul(argv[2], 0, 10);
    if (keep > mib) return 2;
    size_t len = mib << 20, kept = keep << 20;
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 3;
    /* Small pages only: a huge page given back in part is split, and counted apart. */
    madvise(p, len, MADV_NOHUGEPAGE);
    memset(p, 1, len);
    if (madvise(p + kept, len - kept, MADV_FREE) != 0) return 4;
    /* The kernel marks freed pages in per-CPU batches of up to 15: mlock drains every
     * CPU's (lru_add_drain_all), so LazyFree counts all of them now. */
    static char page[4096];
    if (mlock(page, sizeof page) == 0) munlock(page, sizeof page);
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
