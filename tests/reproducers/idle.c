/* Many idle processes, as a busy node has: usage: idle N. Forks N children that each
 * sleep until killed (they die with the parent: PR_SET_PDEATHSIG), then prints
 * "ready N" and sleeps. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    int n = atoi(argv[1]);
    pid_t parent = getpid();
    for (int i = 0; i < n; i++) {
        pid_t c = fork();
        if (c < 0) return 3;
        if (c == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(0);
            for (;;) pause();
        }
    }
    printf("ready %d\n", n);
    fflush(stdout);
    for (;;) pause();
}
