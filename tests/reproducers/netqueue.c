/* Socket buffers in a network namespace of its own: loopback TCP connections whose senders
 * wrote until the kernel refused more and whose receivers never read.
 * usage: netqueue PAIRS [IDLE]
 * Unshares its network namespace (root), brings its loopback up, connects PAIRS pairs,
 * writes 64 KiB at a time into each until the write would block, opens IDLE more UDP
 * sockets bound to the loopback with nothing queued (a socket table of over 1 MiB at
 * 10,000), then prints "ready PID BYTES" (every byte written, each now in a send or a
 * receive queue of the namespace) and sleeps. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    exit(1);
}

int main(int argc, char **argv) {
    int pairs = argc > 1 ? atoi(argv[1]) : 4;
    int idle = argc > 2 ? atoi(argv[2]) : 0;
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    if (unshare(CLONE_NEWNET) != 0)
        die("unshare");
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
        die("SIOCGIFFLAGS");
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        die("SIOCSIFFLAGS");
    close(s);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof at;
    if (bind(l, (struct sockaddr *)&at, sizeof at) != 0 || listen(l, pairs) != 0 ||
        getsockname(l, (struct sockaddr *)&at, &len) != 0)
        die("listen");
    static char chunk[64 << 10];
    memset(chunk, 1, sizeof chunk);
    long long total = 0;
    for (int i = 0; i < pairs; i++) {
        int tx = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(tx, (struct sockaddr *)&at, sizeof at) != 0)
            die("connect");
        if (accept(l, NULL, NULL) < 0)
            die("accept");
        fcntl(tx, F_SETFL, O_NONBLOCK);
        for (;;) {
            ssize_t n = write(tx, chunk, sizeof chunk);
            if (n < 0) {
                if (errno == EAGAIN)
                    break;
                die("write");
            }
            total += n;
        }
    }
    for (int i = 0; i < idle; i++) {
        int u = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (u < 0 || bind(u, (struct sockaddr *)&any, sizeof any) != 0)
            die("udp");
    }
    /* The last segments may still be on their way from the send queue to the receive
     * queue; either way they are in one of the two. */
    printf("ready %d %lld\n", getpid(), total);
    fflush(stdout);
    for (;;)
        pause();
}
