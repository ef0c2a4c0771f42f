/* heaptrack: an LD_PRELOAD heap tracker for the openwrt-wolf performance lab.
 *
 * Counts the bytes the program asked for (not the allocator's rounding), so the figures are
 * the same under glibc and musl: live bytes, their peak, allocations and frees. Each block
 * carries a 16-byte header (requested size, offset back to the real block), which keeps the
 * tracker independent of the allocator's malloc_usable_size.
 *
 * HEAPTRACK_OUT=<file>: one line per report, appended (O_APPEND, one write() per line):
 *   heaptrack pid=<pid> event=<start|mark|exit> live=<B> peak=<B> allocs=<n> frees=<n>
 * SIGUSR2 writes a "mark" line and starts a new peak window (peak := live), so a driver can
 * read the peak of one phase (before/after a batch of requests). A process exits with an
 * "exit" line (destructor). Without HEAPTRACK_OUT nothing is written. A program that installs
 * its own SIGUSR2 handler takes the marks over (uhttpd and uclient-fetch do not).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HDR 16 /* keeps 8-byte alignment on o32 and 16 on 64-bit hosts */

struct hdr {
	size_t size;   /* bytes requested */
	size_t offset; /* from the real block's start to the user pointer */
};

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);

static volatile size_t live, peak;
static volatile unsigned long allocs, frees;
static int out_fd = -1;

/* dlsym() may allocate (glibc's dlerror buffer): serve those from a static arena */
static char boot_arena[4096];
static size_t boot_used;
static int resolving;

static void resolve(void)
{
	if (real_malloc || resolving)
		return;
	resolving = 1;
	real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	resolving = 0;
}

static void *boot_alloc(size_t n)
{
	size_t at = (boot_used + 15) & ~(size_t)15;
	if (at + n > sizeof(boot_arena))
		return NULL;
	boot_used = at + n;
	return boot_arena + at;
}

static int from_boot(void *p)
{
	return (char *)p >= boot_arena && (char *)p < boot_arena + sizeof(boot_arena);
}

static void count_alloc(size_t n)
{
	size_t now = __atomic_add_fetch(&live, n, __ATOMIC_RELAXED);
	size_t old = __atomic_load_n(&peak, __ATOMIC_RELAXED);
	while (now > old &&
	       !__atomic_compare_exchange_n(&peak, &old, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	__atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
}

/* align 0: the allocator's own alignment (the header is a multiple of it) */
static void *track(size_t size, size_t align)
{
	char *raw, *user;
	struct hdr *h;
	size_t extra = HDR + align;
	if (size > SIZE_MAX - extra) {
		errno = ENOMEM;
		return NULL;
	}
	resolve();
	raw = real_malloc ? real_malloc(size + extra) : boot_alloc(size + extra);
	if (!raw)
		return NULL;
	user = raw + HDR;
	if (align)
		user = (char *)(((uintptr_t)user + align - 1) & ~(uintptr_t)(align - 1));
	h = (struct hdr *)(user - HDR);
	h->size = size;
	h->offset = (size_t)(user - raw);
	count_alloc(size);
	return user;
}

static size_t size_of(void *p)
{
	return ((struct hdr *)((char *)p - HDR))->size;
}

void *malloc(size_t size)
{
	return track(size, 0);
}

void free(void *p)
{
	struct hdr *h;
	char *raw;
	if (!p)
		return;
	h = (struct hdr *)((char *)p - HDR);
	raw = (char *)p - h->offset;
	__atomic_sub_fetch(&live, h->size, __ATOMIC_RELAXED);
	__atomic_add_fetch(&frees, 1, __ATOMIC_RELAXED);
	if (!from_boot(raw) && real_free)
		real_free(raw);
}

void *calloc(size_t n, size_t size)
{
	void *p;
	if (size && n > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	p = track(n * size, 0);
	if (p)
		memset(p, 0, n * size);
	return p;
}

void *realloc(void *p, size_t size)
{
	void *q;
	size_t old;
	if (!p)
		return malloc(size);
	if (!size) {
		free(p);
		return NULL;
	}
	old = size_of(p);
	q = malloc(size);
	if (!q)
		return NULL;
	memcpy(q, p, old < size ? old : size);
	free(p);
	return q;
}

void *memalign(size_t align, size_t size)
{
	if (!align || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return track(size, align);
}

void *aligned_alloc(size_t align, size_t size)
{
	return memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p;
	if (!align || (align & (align - 1)) || align % sizeof(void *))
		return EINVAL;
	p = track(size, align);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *valloc(size_t size)
{
	return memalign((size_t)sysconf(_SC_PAGESIZE), size);
}

size_t malloc_usable_size(void *p)
{
	return p ? size_of(p) : 0;
}

/* async-signal-safe number formatting: the report runs in a signal handler */
static char *put_str(char *at, const char *s)
{
	while (*s)
		*at++ = *s++;
	return at;
}

static char *put_num(char *at, unsigned long long v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*at++ = tmp[--n];
	return at;
}

static void report(const char *event)
{
	char line[256], *at = line;
	int saved = errno;
	if (out_fd < 0)
		return;
	at = put_str(at, "heaptrack pid=");
	at = put_num(at, (unsigned long long)getpid());
	at = put_str(at, " event=");
	at = put_str(at, event);
	at = put_str(at, " live=");
	at = put_num(at, live);
	at = put_str(at, " peak=");
	at = put_num(at, peak);
	at = put_str(at, " allocs=");
	at = put_num(at, allocs);
	at = put_str(at, " frees=");
	at = put_num(at, frees);
	*at++ = '\n';
	if (write(out_fd, line, (size_t)(at - line)) < 0) {
		/* nothing to do: a report must never disturb the program */
	}
	errno = saved;
}

static void on_mark(int sig)
{
	(void)sig;
	report("mark");
	__atomic_store_n(&peak, __atomic_load_n(&live, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void heaptrack_init(void)
{
	const char *path;
	struct sigaction sa;
	resolve();
	/* the handler is installed even without an output file, so a mark never kills */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_mark;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);
	path = getenv("HEAPTRACK_OUT");
	if (!path || !*path)
		return;
	out_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	report("start");
}

__attribute__((destructor)) static void heaptrack_fini(void)
{
	report("exit");
}
