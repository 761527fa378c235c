/* A random allocation program, chosen by its seed: the differential tester's subject.
 *
 *   mallocfuzz SEED
 *
 * Threads (1-64, most runs few), each running a few hundred to a few thousand operations:
 * malloc, calloc, realloc, memalign/posix_memalign/aligned_alloc, frees in random order,
 * frees of other threads' blocks (through a shared hand-off queue), bursts of large blocks
 * freed together (they raise glibc's dynamic mmap threshold), fastbin- and tcache-sized
 * churn, and now and then malloc_trim(0). One program in eight first maps a page 256 KiB past
 * the break, so brk soon fails and the main arena goes on in mmapped pieces (glibc's
 * MORECORE fallback: a non-contiguous main arena). Some threads exit when done (their arenas stay),
 * the others park. Once every thread is done the main thread asks glibc itself what it
 * holds free and prints, with write(2) only (no stdio: it would allocate):
 *
 *   ready FORDBLKS ARENA ORDBLKS SMBLKS FSMBLKS THREADS
 *
 * then holds still until killed: nothing allocates after the line. mallinfo2 (2.33+) when
 * the C library has it, else mallinfo (int fields: the tester compares them modulo 2^32).
 *
 * Build with -fno-builtin-malloc -fno-builtin-free -pthread (the optimiser deletes unused
 * malloc/free pairs otherwise).
 */
#define _GNU_SOURCE
#include "mallinfo.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define SLOTS 2048
#define QUEUE 4096
#define MAX_THREADS 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_done = PTHREAD_COND_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static void *queue[QUEUE];
static int queued;
static int working;

static uint64_t next(uint64_t *s) {
    /* xorshift64* */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static size_t pick_size(uint64_t *s, size_t cap) {
    uint64_t r = next(s) % 1000;
    size_t n;
    if (r < 550)
        n = 16 + next(s) % 496; /* fastbin and tcache sizes */
    else if (r < 800)
        n = 512 + next(s) % 3584;
    else if (r < 930)
        n = 4096 + next(s) % (124 << 10);
    else if (r < 985)
        n = (128 << 10) + next(s) % ((2 << 20) - (128 << 10));
    else
        n = (2 << 20) + next(s) % (14 << 20); /* above the mmap threshold at first */
    return n < cap ? n : cap;
}

static void touch(uint64_t *s, char *p, size_t n) {
    p[0] = 1;
    if (next(s) % 10 < 3)
        memset(p, 7, n < (1 << 20) ? n : (1 << 20));
    else
        p[n - 1] = 2;
}

struct job {
    uint64_t seed;
    int ops;
    size_t cap;
    int exits;
};

static void *alloc_one(uint64_t *s, size_t cap) {
    size_t n = pick_size(s, cap);
    void *p = NULL;
    switch (next(s) % 10) {
    case 0: {
        size_t count = 1 + next(s) % 8, each = n / count + 1;
        p = calloc(count, each);
        n = count * each;
        break;
    }
    case 1:
        p = memalign((size_t)16 << (next(s) % 8), n);
        break;
    case 2:
        if (posix_memalign(&p, 64, n) != 0)
            p = NULL;
        break;
    case 3:
        p = aligned_alloc(256, (n + 255) & ~(size_t)255);
        break;
    default:
        p = malloc(n);
    }
    if (p)
        touch(s, p, n);
    return p;
}

static void work(struct job *j) {
    uint64_t s = j->seed;
    void *slot[SLOTS] = {0};
    size_t slots = 16 + next(&s) % (SLOTS - 16);
    for (int op = 0; op < j->ops; op++) {
        uint64_t r = next(&s) % 1000;
        size_t i = next(&s) % slots;
        if (r < 450) {
            free(slot[i]);
            slot[i] = alloc_one(&s, j->cap);
        } else if (r < 800) {
            free(slot[i]);
            slot[i] = NULL;
        } else if (r < 880) {
            if (slot[i]) {
                size_t n = pick_size(&s, j->cap);
                void *q = realloc(slot[i], n);
                if (q) {
                    slot[i] = q;
                    touch(&s, q, n);
                }
            }
        } else if (r < 940) {
            /* Hand a block to whichever thread takes it next. */
            pthread_mutex_lock(&lock);
            if (slot[i] && queued < QUEUE) {
                queue[queued++] = slot[i];
                slot[i] = NULL;
            }
            pthread_mutex_unlock(&lock);
        } else if (r < 990) {
            void *p = NULL;
            pthread_mutex_lock(&lock);
            if (queued > 0)
                p = queue[--queued];
            pthread_mutex_unlock(&lock);
            free(p);
        } else if (r < 998) {
            /* A burst of large blocks, pinned by one small live block, then freed. */
            void *big[16];
            int k = 1 + next(&s) % 16;
            for (int b = 0; b < k; b++) {
                size_t n = (1 << 20) + next(&s) % (4 << 20);
                if (n > j->cap)
                    n = j->cap;
                big[b] = malloc(n);
                if (big[b])
                    touch(&s, big[b], n);
            }
            free(slot[i]);
            slot[i] = malloc(64);
            for (int b = 0; b < k; b++)
                free(big[b]);
        } else {
            malloc_trim(next(&s) % 2 ? 0 : 1 << 20);
        }
    }
    /* Leave some blocks live, free the rest. */
    size_t keep = next(&s) % 100;
    for (size_t i = 0; i < slots; i++)
        if ((size_t)(next(&s) % 100) >= keep) {
            free(slot[i]);
            slot[i] = NULL;
        }
    /* The live ones stay reachable from this stack or are leaked on purpose. */
    __asm__ volatile("" : : "r"(slot) : "memory");
}

static void *thread_main(void *arg) {
    struct job *j = arg;
    work(j);
    pthread_mutex_lock(&lock);
    working--;
    pthread_cond_broadcast(&all_done);
    if (!j->exits)
        for (;;)
            pthread_cond_wait(&never, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void put(char **at, const char *s) {
    while (*s)
        *(*at)++ = *s++;
}

static void put_num(char **at, unsigned long long v) {
    char d[24];
    int n = 0;
    do {
        d[n++] = '0' + v % 10;
        v /= 10;
    } while (v);
    *(*at)++ = ' ';
    while (n)
        *(*at)++ = d[--n];
}

int main(int argc, char **argv) {
    uint64_t s = argc > 1 ? strtoull(argv[1], NULL, 10) * 2654435761ULL + 1 : 1;
    next(&s);
    if (next(&s) % 8 == 0) {
        char *brk_end = sbrk(0);
        uintptr_t wall = ((uintptr_t)brk_end + (256 << 10) + 4095) & ~(uintptr_t)4095;
        if (mmap((void *)wall, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                 -1, 0) == MAP_FAILED)
            return 3;
    }
    /* Most programs have few threads; some many. */
    int threads = next(&s) % 4 == 0 ? 1 + next(&s) % MAX_THREADS : next(&s) % 5;
    /* mallinfo's int fields cannot hold more than 2 GiB: keep blocks smaller there. */
    size_t cap = mallinfo2_weak ? (16 << 20) : (4 << 20);
    static struct job jobs[MAX_THREADS + 1];
    static pthread_t tids[MAX_THREADS];
    for (int t = 0; t <= threads; t++) {
        jobs[t].seed = next(&s) | 1;
        jobs[t].ops = 200 + next(&s) % (threads > 16 ? 1000 : 4000);
        jobs[t].cap = cap;
        jobs[t].exits = next(&s) % 2;
    }
    working = threads;
    for (int t = 0; t < threads; t++)
        if (pthread_create(&tids[t], NULL, thread_main, &jobs[t]) != 0)
            abort();
    work(&jobs[threads]);
    pthread_mutex_lock(&lock);
    while (working > 0)
        pthread_cond_wait(&all_done, &lock);
    /* What is left in the hand-off queue stays live. */
    pthread_mutex_unlock(&lock);
    for (int t = 0; t < threads; t++)
        if (jobs[t].exits)
            pthread_join(tids[t], NULL);

    struct glibc_mallinfo m = glibc_mallinfo();
    unsigned long long fordblks = m.fordblks, arena = m.arena, ordblks = m.ordblks,
                       smblks = m.smblks, fsmblks = m.fsmblks;
    char line[256], *at = line;
    put(&at, "ready");
    put_num(&at, fordblks);
    put_num(&at, arena);
    put_num(&at, ordblks);
    put_num(&at, smblks);
    put_num(&at, fsmblks);
    put_num(&at, (unsigned long long)threads);
    *at++ = '\n';
    if (write(1, line, at - line) < 0)
        return 1;
    for (;;)
        pause();
}
