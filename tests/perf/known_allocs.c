/* A program with known allocations: the oracle for heaptrack (tests/perf/test_heap.py).
 * Built with -O0 -fno-builtin so the compiler keeps every call. */
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
int main(void)
{
	char *a = malloc(1000);          /* live 1000 */
	char *b = calloc(10, 100);       /* live 2000 */
	void *c;
	memset(a, 1, 1000);
	a = realloc(a, 3000);            /* live 4000, peak 5000 during the copy */
	if (posix_memalign(&c, 64, 500)) /* live 4500 */
		return 1;
	if ((unsigned long)c % 64)
		return 2;
	free(b);                         /* live 3500 */
	raise(SIGUSR2);                  /* mark: live 3500 peak 5000; window restarts at 3500 */
	b = malloc(200);                 /* live 3700 */
	free(b);                         /* live 3500 */
	free(a);                         /* live 500 */
	write(1, "ok\n", 3);              /* no stdio: its buffer would be counted */
	raise(SIGUSR2);                  /* mark: peak of the window 3700     */
	free(c);
	return 0;
}
