/* Fuzz target: nsbox_seccomp_compile on arbitrary policy text (an exact
 * malloc'ed copy, not NUL-terminated, so a read past the end is caught).
 *
 * Checked: a failure fills the error with the same errno; a success yields
 * a program the kernel's checker would accept in shape: at most
 * BPF_MAXINSNS instructions, every jump inside the program, loads inside
 * struct seccomp_data, and a return as the last instruction. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <string.h>

#include "fuzz.h"
#include "nsbox.h"
#include "seccomp.h"

static void
count_warning (const char *message, void *data)
{
  FUZZ_CHECK (message && *message, "empty warning");
  (*(size_t *)data)++;
}

static void
check_program (const struct nsbox_bpf *bpf)
{
  FUZZ_CHECK (bpf->insns && bpf->len > 0 && bpf->len <= BPF_MAXINSNS, "program of %u instructions",
              bpf->len);
  for (size_t i = 0; i < bpf->len; i++)
    {
      const struct sock_filter *insn = &bpf->insns[i];
      size_t next = i + 1;
      switch (BPF_CLASS (insn->code))
        {
        case BPF_JMP:
          if (BPF_OP (insn->code) == BPF_JA)
            FUZZ_CHECK (next + insn->k < bpf->len, "insn %zu: ja past the end", i);
          else
            FUZZ_CHECK (next + insn->jt < bpf->len && next + insn->jf < bpf->len,
                        "insn %zu: jump past the end", i);
          break;
        case BPF_LD:
          if (BPF_MODE (insn->code) == BPF_ABS)
            FUZZ_CHECK (BPF_SIZE (insn->code) == BPF_W && insn->k % 4 == 0
                            && insn->k < sizeof (struct seccomp_data),
                        "insn %zu: load of offset %u", i, insn->k);
          break;
        default:
          break;
        }
    }
  FUZZ_CHECK (BPF_CLASS (bpf->insns[bpf->len - 1].code) == BPF_RET,
              "the last instruction is not a return");
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = malloc (size ? size : 1);
  FUZZ_CHECK (text, "out of memory");
  memcpy (text, data, size);

  struct nsbox_bpf bpf = { NULL, 0 };
  struct nsbox_error *err = NULL;
  size_t warnings = 0;
  int r = nsbox_seccomp_compile (text, size, "fuzz.yaml", &bpf, count_warning, &warnings, &err);
  if (r < 0)
    {
      FUZZ_CHECK (err && nsbox_error_errno (err) == -r && *nsbox_error_message (err),
                  "compile failed with %d but the error is missing or disagrees", r);
      FUZZ_CHECK (!bpf.insns, "a failed compile wrote its output");
    }
  else
    {
      FUZZ_CHECK (!err, "compile succeeded and filled the error");
      check_program (&bpf);
    }
  nsbox_bpf_release (&bpf);
  nsbox_error_free (err);
  free (text);
  return 0;
}
