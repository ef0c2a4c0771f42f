/* insncount: a QEMU TCG plugin that counts the guest instructions a qemu-user process
 * executes and writes the count to the file named by its "out" argument when the process
 * exits:  qemu-aarch64 -plugin insncount.so,out=/path/count -cpu cortex-a76 PROGRAM ...
 * The file holds one line: "insns <n>\n".
 *
 * Why: under emulation an instruction's time says nothing about the real core (an AESE is
 * slow in TCG, about one cycle on a Cortex-A76), its count is the same on both. The lab
 * (perf/instructions.py) compares the crypto extensions on and off by this count.
 *
 * The declarations are the few the plugin API (QEMU_PLUGIN_VERSION 1: QEMU 7.x, Debian 12's
 * qemu-user) documents in include/qemu/qemu-plugin.h; they are written here so the plugin
 * builds with the host's gcc alone. Each translated block adds its instruction count to the
 * counter when it executes (an inline add: no callback per block). A block left early by a
 * fault counts whole; the lab's programs take none on their measured paths.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
					      void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

EXPORT int qemu_plugin_version = 1;

static uint64_t insns;
static char out_path[4096];

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns,
						 qemu_plugin_tb_n_insns(tb));
}

static void write_count(qemu_plugin_id_t id, void *userdata)
{
	FILE *f;
	(void)id;
	(void)userdata;
	f = fopen(out_path, "w");
	if (!f)
		return; /* the lab reads no count and says so */
	fprintf(f, "insns %llu\n", (unsigned long long)insns);
	fclose(f);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	int i;
	(void)info;
	for (i = 0; i < argc; i++)
		if (strncmp(argv[i], "out=", 4) == 0 && strlen(argv[i] + 4) < sizeof(out_path))
			strcpy(out_path, argv[i] + 4);
	if (!out_path[0]) {
		fputs("insncount: needs out=<file>\n", stderr);
		return 1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, write_count, NULL);
	return 0;
}
