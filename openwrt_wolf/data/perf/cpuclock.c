/* cpuclock: an LD_PRELOAD shim for the openwrt-wolf performance lab that makes a benchmark
 * program's clocks count the CPU time of its own process instead of wall time.
 *
 * Why: the benchmark tools (wolfCrypt's benchmark, `openssl speed`, Mbed TLS's benchmark)
 * time their loops with clock_gettime/gettimeofday or stop them with alarm(). On a shared
 * machine, or under qemu-user next to other jobs, wall time includes the time the process
 * waited for a CPU, so a result depends on the machine's load. With this shim loaded:
 *   clock_gettime(CLOCK_REALTIME|MONOTONIC*|BOOTTIME), gettimeofday() read
 *     CLOCK_PROCESS_CPUTIME_ID (an interval is then CPU seconds);
 *   alarm(n) arms a POSIX timer on CLOCK_PROCESS_CPUTIME_ID that raises SIGALRM after n CPU
 *     seconds (the program's own SIGALRM handler runs as before).
 * Only for benchmark programs: a server's certificate checks need the real date.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int (*real_clock_gettime)(clockid_t, struct timespec *);

/* The C library's clock_gettime for our struct timespec. A 32-bit target with a 64-bit
 * time_t (musl 1.2+, OpenWrt's) names it __clock_gettime64: its headers redirect the
 * declaration there, so the clock_gettime below is that symbol, and the one dlsym finds
 * under the plain name is the old 32-bit time_t call, which fills only half the struct. */
static void *real_symbol(void)
{
	void *p = 0;
	if (sizeof(time_t) == 8 && sizeof(long) == 4)
		p = dlsym(RTLD_NEXT, "__clock_gettime64");
	return p ? p : dlsym(RTLD_NEXT, "clock_gettime");
}

static int cpu_now(struct timespec *ts)
{
	if (!real_clock_gettime)
		real_clock_gettime = (int (*)(clockid_t, struct timespec *))real_symbol();
	return real_clock_gettime(CLOCK_PROCESS_CPUTIME_ID, ts);
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	switch (clk) {
	case CLOCK_REALTIME:
	case CLOCK_MONOTONIC:
	case CLOCK_MONOTONIC_RAW:
	case CLOCK_MONOTONIC_COARSE:
	case CLOCK_REALTIME_COARSE:
	case CLOCK_BOOTTIME:
		return cpu_now(ts);
	default:
		if (!real_clock_gettime)
			cpu_now(ts);
		return real_clock_gettime(clk, ts);
	}
}

int gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec ts;
	(void)tz;
	if (cpu_now(&ts))
		return -1;
	tv->tv_sec = ts.tv_sec; /* glibc declares tv nonnull */
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

static timer_t alarm_timer;
static int have_timer;

unsigned int alarm(unsigned int seconds)
{
	struct itimerspec its, old;
	if (!have_timer) {
		struct sigevent sev;
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_SIGNAL;
		sev.sigev_signo = SIGALRM;
		if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &sev, &alarm_timer))
			return 0;
		have_timer = 1;
	}
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = seconds;
	if (timer_settime(alarm_timer, 0, &its, &old))
		return 0;
	return (unsigned int)old.it_value.tv_sec + (old.it_value.tv_nsec ? 1 : 0);
}
