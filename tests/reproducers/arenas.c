/* glibc per-thread arenas: 16 threads each malloc(64) and stay alive.
 * Prints "ready" once every thread has allocated, then sleeps. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define THREADS 16
static pthread_barrier_t all_allocated;

static void *worker(void *arg) {
    volatile char *p = malloc(64);
    p[0] = 1;
    pthread_barrier_wait(&all_allocated);
    for (;;) pause();
    return arg;
}

int main(void) {
    pthread_t t[THREADS];
    pthread_barrier_init(&all_allocated, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, NULL);
    pthread_barrier_wait(&all_allocated);
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
