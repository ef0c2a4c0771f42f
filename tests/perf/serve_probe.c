/* A server for the places' serve tests (tests/perf/test_serve.py), small enough for any
 * place's C library: listens on 127.0.0.1:<port>; each connection gets 0.2 s of CPU burned,
 * then is closed; SIGUSR2 appends "mark <n>" to the file $MARKS (as heaptrack's marks do),
 * SIGTERM appends "exit" and ends it. Without a port it prints its usage and exits 2. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t marks, stop;

static void on_usr2(int sig) { (void)sig; marks++; }
static void on_term(int sig) { (void)sig; stop = 1; }

static void note(const char *line) {
    const char *path = getenv("MARKS");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fputs(line, f);
        fclose(f);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        puts("usage: serve_probe PORT");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sigaction(SIGUSR2, &sa, NULL);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)atoi(argv[1]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 8) != 0) {
        perror("bind");
        return 1;
    }
    printf("listening on %s\n", argv[1]);
    fflush(stdout);
    int done = 0;
    while (!stop) {
        while (done < marks) { /* a signal between the check and poll waits 0.1 s at most */
            char line[32];
            snprintf(line, sizeof line, "mark %d\n", ++done);
            note(line);
        }
        struct pollfd p = {s, POLLIN, 0};
        if (poll(&p, 1, 100) != 1)
            continue;
        int c = accept(s, NULL, NULL);
        if (c < 0)
            continue;
        clock_t t0 = clock();
        while (clock() - t0 < CLOCKS_PER_SEC / 5)
            ;
        close(c);
    }
    note("exit\n");
    return 0;
}
