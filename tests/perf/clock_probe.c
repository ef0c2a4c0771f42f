/* The oracle for cpuclock (tests/perf/test_cpuclock.py): the kernel's CPU accounting of this
 * process (getrusage) against what clock_gettime(CLOCK_MONOTONIC) and gettimeofday() report
 * over a busy loop that alarm(1) ends. Prints: <monotonic us> <gettimeofday us> <rusage us> */
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
}

static long cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L + ru.ru_utime.tv_usec +
	       ru.ru_stime.tv_usec;
}

int main(void)
{
	struct timespec m0, m1;
	struct timeval t0, t1;
	long c0, c1;
	volatile unsigned long spin = 0;
	signal(SIGALRM, on_alarm);
	c0 = cpu_us();
	clock_gettime(CLOCK_MONOTONIC, &m0);
	gettimeofday(&t0, NULL);
	alarm(1);
	while (!alarmed)
		spin++;
	clock_gettime(CLOCK_MONOTONIC, &m1);
	gettimeofday(&t1, NULL);
	c1 = cpu_us();
	printf("%ld %ld %ld\n", (m1.tv_sec - m0.tv_sec) * 1000000L + (m1.tv_nsec - m0.tv_nsec) / 1000,
	       (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_usec - t0.tv_usec), c1 - c0);
	return 0;
}
