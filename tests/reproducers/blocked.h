/* Waits as a service waits, so that a remedy applied to the process finds its main thread
 * blocked in a system call, and says afterwards whether the process was harmed.
 *
 * wait_forever() waits in the call MEMBLOAT_WAIT_IN names: pause, nanosleep, read (on
 * stdin, a pipe) or futex (woken by a thread that reads stdin); pause when unset. Woken
 * (SIGUSR1 for pause and nanosleep, a byte on stdin for read and futex), it prints
 *   woke KIND CALL DATA
 * CALL is "ok" when every return of the call was one the program expects (EINTR where
 * SIGUSR1's handler ran; the byte from read; 0 or EAGAIN from the futex), else
 * "errno=N" for the first other one (512-516 are the kernel's internal restart codes,
 * which must never reach a program); DATA is "ok" when the live blocks registered with
 * live_add() still hash to what they held before the first wait, else "changed". Then it
 * waits again. stdin's end ends the process where it waits in read. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LIVE_MAX 65536
static struct {
    const unsigned char *p;
    size_t n;
} live_blocks[LIVE_MAX];
static size_t live_count;

static void live_add(const void *p, size_t n) {
    if (p && live_count < LIVE_MAX) {
        live_blocks[live_count].p = p;
        live_blocks[live_count].n = n;
        live_count++;
    }
}

/* FNV-1a over every live block's bytes. */
static uint64_t live_hash(void) {
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < live_count; i++)
        for (size_t k = 0; k < live_blocks[i].n; k++) {
            h ^= live_blocks[i].p[k];
            h *= 1099511628211ULL;
        }
    return h;
}

static volatile sig_atomic_t blocked_woken;
static void blocked_on_usr1(int sig) {
    (void)sig;
    blocked_woken = 1;
}

static int blocked_word;

static void *blocked_waker(void *unused) {
    (void)unused;
    char c;
    for (;;) {
        ssize_t r = read(0, &c, 1);
        if (r == 0) return 0;
        if (r != 1) continue;
        __atomic_store_n(&blocked_word, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &blocked_word, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
    }
    return 0;
}

static void wait_forever(void) {
    const char *kind = getenv("MEMBLOAT_WAIT_IN");
    if (!kind) kind = "pause";
    uint64_t start = live_hash();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = blocked_on_usr1; /* no SA_RESTART: a woken pause or nanosleep says EINTR */
    sigaction(SIGUSR1, &sa, 0);
    if (strcmp(kind, "futex") == 0) {
        pthread_t t;
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        pthread_sigmask(SIG_BLOCK, &usr1, 0);
        pthread_create(&t, 0, blocked_waker, 0);
        pthread_sigmask(SIG_UNBLOCK, &usr1, 0);
    }
    for (;;) {
        int bad = 0;
        if (strcmp(kind, "nanosleep") == 0) {
            while (!blocked_woken) {
                struct timespec t = {3600, 0};
                if (nanosleep(&t, 0) != 0 && errno != EINTR && !bad) bad = errno;
            }
        } else if (strcmp(kind, "read") == 0) {
            char c;
            for (;;) {
                ssize_t r = read(0, &c, 1);
                if (r == 1) break;
                if (r == 0) exit(0);
                if (!bad) bad = errno;
            }
        } else if (strcmp(kind, "futex") == 0) {
            while (!__atomic_load_n(&blocked_word, __ATOMIC_SEQ_CST)) {
                long r = syscall(SYS_futex, &blocked_word, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);
                if (r != 0 && errno != EAGAIN && !bad) bad = errno;
            }
            __atomic_store_n(&blocked_word, 0, __ATOMIC_SEQ_CST);
        } else {
            while (!blocked_woken)
                if (pause() != -1 || errno != EINTR)
                    if (!bad) bad = errno ? errno : -1;
        }
        blocked_woken = 0;
        char call[32] = "ok";
        if (bad) snprintf(call, sizeof call, "errno=%d", bad);
        printf("woke %s %s %s\n", kind, call, live_hash() == start ? "ok" : "changed");
        fflush(stdout);
    }
}
