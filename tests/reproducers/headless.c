/* A process whose main thread exits (pthread_exit) while a worker keeps MIB MiB of
 * anonymous memory touched: /proc/PID then shows no memory (no VmRSS, a statm of zeros,
 * state Z), though the process holds all of it and the OOM killer can pick it.
 *
 * usage: headless MIB
 * Prints "ready TID" from the worker once the main thread has exited, then sleeps. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_t main_thread;
static size_t bytes;

static void *worker(void *arg) {
    (void)arg;
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(3);
    memset(p, 1, bytes);
    /* The main thread is joinable: this returns once it has exited. */
    pthread_join(main_thread, NULL);
    printf("ready %ld\n", (long)syscall(SYS_gettid));
    for (;;) pause();
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 2) return 2;
    bytes = strtoull(argv[1], 0, 0) << 20;
    main_thread = pthread_self();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL)) return 3;
    pthread_exit(NULL);
}
