/* openwrt-wolf: the minimal wolfSSL exports only what its consumers use (a linker version
 * script), which leaves out wolfSSL_Malloc/wolfSSL_Free. wolfCrypt's benchmark allocates its
 * buffers through them (XMALLOC); without a user allocator they are plain malloc/free, so the
 * benchmark gets these two, linked into the program. The library's own calls are unchanged. */
#include <stdlib.h>

void *wolfSSL_Malloc(size_t size);
void wolfSSL_Free(void *ptr);
void *wolfSSL_Realloc(void *ptr, size_t size);

void *wolfSSL_Malloc(size_t size)
{
	return malloc(size);
}

void wolfSSL_Free(void *ptr)
{
	free(ptr);
}

void *wolfSSL_Realloc(void *ptr, size_t size)
{
	return realloc(ptr, size);
}
