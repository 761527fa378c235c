/* A tenant's process that holds its own mmap lock for as long as a FUSE server it runs
 * keeps a read waiting: one thread reads, through /proc/self/mem, a page of FILE (a file
 * of that FUSE mount) that is not in memory, which holds the mmap lock for reading while
 * the fault waits for the server; another then maps memory, and waits for the lock for
 * writing. Every other reader of the lock (smaps, smaps_rollup, cmdline, mem) queues
 * behind that writer until the server answers.
 *
 * usage: lockhold FILE
 * Maps FILE and touches 72 MiB of anonymous memory (a deep-tier candidate), prints
 * "ready PID", and on a line on stdin lets its two threads start (made beforehand) and
 * prints "started". */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char *file;
static size_t len;
/* Both threads are made before either takes the lock (a thread's stack is an mmap). */
static pthread_barrier_t go;

static void *reader(void *arg) {
    (void)arg;
    int mem = open("/proc/self/mem", O_RDONLY);
    pthread_barrier_wait(&go);
    char b;
    /* A page in the middle of the file: never read by anyone yet. */
    uintptr_t at = (uintptr_t)file + (len / 2 & ~(uintptr_t)4095);
    if (mem >= 0) (void)!pread(mem, &b, 1, (off_t)at);
    return NULL;
}

static void *mapper(void *arg) {
    (void)arg;
    pthread_barrier_wait(&go);
    usleep(100000);
    for (;;) {
        void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) munmap(p, 4096);
        usleep(1000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 2) return 2;
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || st.st_size < 8192) return 3;
    len = (size_t)st.st_size;
    file = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file == MAP_FAILED) return 4;
    size_t bytes = 72u << 20;
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 5;
    memset(p, 1, bytes);
    printf("ready %d\n", (int)getpid());
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 6;
    pthread_t r, m;
    pthread_barrier_init(&go, NULL, 3);
    pthread_create(&r, NULL, reader, NULL);
    pthread_create(&m, NULL, mapper, NULL);
    pthread_barrier_wait(&go);
    printf("started\n");
    for (;;) pause();
}
