/* jemalloc linked in statically from Debian's libjemalloc.a (libjemalloc-dev), keeping
 * freed memory in its arenas: a C twin of tests/reproducers/jemalloc/main.rs.
 * usage: jefree SEED THREADS MIB KEEP_PERCENT
 * Each thread allocates blocks of random sizes (16 B to 4 MiB) up to MIB/THREADS MiB,
 * touches every page, frees all but KEEP_PERCENT % of them in random order, and waits.
 * Then the program prints "ready version=V pactive=N pdirty=N pmuzzy=N" (jemalloc's own
 * stats.arenas.<all>.*, pages) and, for each line on stdin, "purge" purges every arena
 * first, and prints the line again.
 * Build: cc -O1 -pthread jefree.c -Wl,-Bstatic -ljemalloc -Wl,-Bdynamic -lm -ldl */
#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned long seed, threads, mib, keep;
static pthread_barrier_t all;

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t pages(const char *what) {
    char name[64];
    size_t v = 0, len = sizeof v;
    snprintf(name, sizeof name, "stats.arenas.4096.%s", what);
    if (mallctl(name, &v, &len, NULL, 0)) abort();
    return v;
}

static void print_stats(void) {
    uint64_t epoch = 1;
    size_t len = sizeof epoch;
    const char *version;
    size_t vlen = sizeof version;
    mallctl("epoch", &epoch, &len, &epoch, len);
    mallctl("version", &version, &vlen, NULL, 0);
    printf("ready version=%s pactive=%zu pdirty=%zu pmuzzy=%zu\n", version, pages("pactive"),
           pages("pdirty"), pages("pmuzzy"));
    fflush(stdout);
}

static void *run(void *arg) {
    uint64_t s = (seed * 0x9e3779b97f4a7c15ull) ^ ((uintptr_t)arg + 1) | 1;
    size_t cap = 1 << 16, n = 0, total = 0;
    void **blocks = malloc(cap * sizeof *blocks);
    while (total < (mib << 20) / threads && n < cap) {
        size_t size = (size_t)16 << (next(&s) % 19);
        size += next(&s) % size;
        char *b = malloc(size);
        for (size_t i = 0; i < size; i += 4096) b[i] = 1;
        blocks[n++] = b;
        total += size;
    }
    size_t kept = n * keep / 100;
    while (n > kept) {
        size_t i = next(&s) % n;
        free(blocks[i]);
        blocks[i] = blocks[--n];
    }
    pthread_barrier_wait(&all);
    for (;;) pause();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    seed = strtoul(argv[1], 0, 10);
    threads = strtoul(argv[2], 0, 10);
    mib = strtoul(argv[3], 0, 10);
    keep = strtoul(argv[4], 0, 10);
    pthread_barrier_init(&all, NULL, threads + 1);
    for (unsigned long t = 0; t < threads; t++) {
        pthread_t th;
        pthread_create(&th, NULL, run, (void *)(uintptr_t)t);
    }
    pthread_barrier_wait(&all);
    print_stats();
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (!strncmp(line, "purge", 5) && mallctl("arena.4096.purge", NULL, NULL, NULL, 0))
            abort();
        print_stats();
    }
    return 0;
}
