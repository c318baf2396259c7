/* Seccomp policy compiler, front end: YAML policy -> libseccomp rules.
 *
 * Conditional rules are ordered in the policy (the first rule that matches
 * decides), but libseccomp leaves the outcome of overlapping rules with
 * different actions undefined and takes one comparison per argument in a
 * rule. So the region each rule decides is computed here as disjoint boxes
 * (a set of values per argument), and every box becomes rules that select
 * exactly that box: no two rules emitted for one syscall overlap, and the
 * order libseccomp evaluates them in cannot change the outcome.
 *
 * Values are kept in the "compact space" of the mask their argument is
 * compared under (the mask's bits gathered into the low bits), so a masked
 * comparison is an ordinary integer range and one algebra of sorted spans
 * covers eq, ne, lt, le, gt, ge and in, masked or not. */
#include "seccomp_policy.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "error.h"
#include "seccomp_names.h"
#include "seccomp_regions.h"
#include "util.h"

/* Above what a sane policy needs (the default's socket rule takes 193);
 * stops a policy from exhausting the 4096-instruction limit one rule at a
 * time with an unclear error, and bounds libseccomp's insertion time. */
#define MAX_RULES_PER_SYSCALL 256

/* ---- Policy parsing state and messages ------------------------------------ */

struct claimed_name
{
  const char *name;
  const yaml_node_t *node;
};

struct policy
{
  const char *name;
  yaml_document_t *doc;
  scmp_filter_ctx ctx;
  uint32_t default_action;
  nsbox_warning_fn warn;
  void *warn_data;
  struct nsbox_error **err;
  struct claimed_name *claimed;
  size_t claimed_len;
  size_t claimed_cap;
};

static void
policy_clear (struct policy *p)
{
  if (p->ctx)
    seccomp_release (p->ctx);
  free (p->claimed);
}

static int policy_error (const struct policy *p, const yaml_node_t *node, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Fails with -EBADMSG and "name:line:col: what" (libyaml marks are 0-based). */
static int
policy_error (const struct policy *p, const yaml_node_t *node, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *what = vxasprintf (fmt, ap);
  va_end (ap);
  if (!what)
    return nsbox_error_oom (p->err);
  return nsbox_error_set (p->err, EBADMSG, "%s:%zu:%zu: %s", p->name, node->start_mark.line + 1,
                          node->start_mark.column + 1, what);
}

static int policy_warn (const struct policy *p, const yaml_node_t *node, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
policy_warn (const struct policy *p, const yaml_node_t *node, const char *fmt, ...)
{
  if (!p->warn)
    return 0;
  cleanup_free char *message = NULL;
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *what = vxasprintf (fmt, ap);
  va_end (ap);
  if (!what
      || !(message = xasprintf ("%s:%zu:%zu: %s", p->name, node->start_mark.line + 1,
                                node->start_mark.column + 1, what)))
    return nsbox_error_oom (p->err);
  p->warn (message, p->warn_data);
  return 0;
}

static int
rule_error (const struct policy *p, const yaml_node_t *node, const char *syscall, int rc)
{
  return nsbox_error_sys (p->err, -rc, "%s:%zu:%zu: add seccomp rule for '%s'", p->name,
                          node->start_mark.line + 1, node->start_mark.column + 1, syscall);
}

/* ---- YAML shapes ---------------------------------------------------------- */

/* The text of a scalar node, or NULL for other nodes and embedded NULs. */
static const char *
scalar_text (const yaml_node_t *node)
{
  if (!node || node->type != YAML_SCALAR_NODE)
    return NULL;
  const char *text = (const char *)node->data.scalar.value;
  return strlen (text) == node->data.scalar.length ? text : NULL;
}

static yaml_node_t *
node_at (const struct policy *p, int index)
{
  return yaml_document_get_node (p->doc, index);
}

/* Checks that node is a mapping whose keys all come from keys[] (each at
 * most once) and stores the value of keys[i] in values[i] (NULL if absent). */
static int
map_fields (const struct policy *p, const yaml_node_t *node, const char *what,
            const char *const *keys, size_t n_keys, const yaml_node_t **values)
{
  if (node->type != YAML_MAPPING_NODE)
    return policy_error (p, node, "%s must be a mapping", what);
  for (size_t i = 0; i < n_keys; i++)
    values[i] = NULL;
  for (yaml_node_pair_t *pair = node->data.mapping.pairs.start; pair < node->data.mapping.pairs.top;
       pair++)
    {
      const yaml_node_t *key = node_at (p, pair->key);
      const char *text = scalar_text (key);
      if (!text)
        return policy_error (p, key ? key : node, "keys of %s must be names", what);
      size_t i = 0;
      while (i < n_keys && strcmp (keys[i], text) != 0)
        i++;
      if (i == n_keys)
        return policy_error (p, key, "unknown key '%s' in %s", text, what);
      if (values[i])
        return policy_error (p, key, "duplicate key '%s' in %s", text, what);
      values[i] = node_at (p, pair->value);
    }
  return 0;
}

typedef int (*entry_fn) (struct policy *p, const yaml_node_t *key, const char *name,
                         const yaml_node_t *value);

/* Calls fn for each entry of a mapping with free-form, unique keys. */
static int
for_each_entry (struct policy *p, const yaml_node_t *node, const char *what, entry_fn fn)
{
  if (node->type != YAML_MAPPING_NODE)
    return policy_error (p, node, "%s must be a mapping", what);
  for (yaml_node_pair_t *pair = node->data.mapping.pairs.start; pair < node->data.mapping.pairs.top;
       pair++)
    {
      const yaml_node_t *key = node_at (p, pair->key);
      const char *name = scalar_text (key);
      if (!name)
        return policy_error (p, key ? key : node, "keys of %s must be names", what);
      for (yaml_node_pair_t *earlier = node->data.mapping.pairs.start; earlier < pair; earlier++)
        if (strcmp (scalar_text (node_at (p, earlier->key)), name) == 0)
          return policy_error (p, key, "duplicate key '%s' in %s", name, what);
      const yaml_node_t *value = node_at (p, pair->value);
      int rc = value ? fn (p, key, name, value) : policy_error (p, key, "missing value");
      if (rc < 0)
        return rc;
    }
  return 0;
}

static int
sequence_length (const yaml_node_t *node)
{
  return (int)(node->data.sequence.items.top - node->data.sequence.items.start);
}

static const yaml_node_t *
sequence_item (const struct policy *p, const yaml_node_t *node, int i)
{
  return node_at (p, node->data.sequence.items.start[i]);
}

/* ---- Scalars: numbers, constants, errno names, actions -------------------- */

static int
parse_number (const char *text, uint64_t *out)
{
  if (!isdigit ((unsigned char)text[0]))
    return -EINVAL;
  char *end = NULL;
  errno = 0;
  unsigned long long value = strtoull (text, &end, 0);
  if (errno || *end)
    return -EINVAL;
  *out = value;
  return 0;
}

/* A number (decimal, 0x hex, 0 octal), a constant name, or several of them
 * joined by '|'. */
static int
parse_value (const struct policy *p, const yaml_node_t *node, uint64_t *out)
{
  const char *text = scalar_text (node);
  if (!text)
    return policy_error (p, node, "expected a number or a constant name");
  cleanup_free char *copy = strdup (text);
  if (!copy)
    return nsbox_error_oom (p->err);
  uint64_t value = 0;
  size_t terms = 0;
  char *save = NULL;
  for (char *term = strtok_r (copy, "|", &save); term; term = strtok_r (NULL, "|", &save))
    {
      term += strspn (term, " \t");
      size_t term_len = strlen (term);
      while (term_len > 0 && (term[term_len - 1] == ' ' || term[term_len - 1] == '\t'))
        term[--term_len] = '\0';
      uint64_t named = 0, part = 0;
      bool is_named = nsbox_policy_constant (term, &named);
      if (isdigit ((unsigned char)term[0]) ? parse_number (term, &part) < 0 : !is_named)
        return policy_error (
            p, node, isdigit ((unsigned char)term[0]) ? "bad number '%s'" : "unknown constant '%s'",
            term);
      value |= is_named ? named : part;
      terms++;
    }
  if (terms == 0)
    return policy_error (p, node, "expected a number or a constant name");
  *out = value;
  return 0;
}

static int
parse_errno (const struct policy *p, const yaml_node_t *node, uint32_t *out)
{
  const char *text = scalar_text (node);
  if (!text)
    return policy_error (p, node, "expected an errno name such as EPERM");
  uint64_t number = 0;
  if (parse_number (text, &number) == 0)
    {
      if (number < 1 || number > 4095)
        return policy_error (p, node, "errno %s is out of range (1 to 4095)", text);
      *out = (uint32_t)number;
      return 0;
    }
  for (int code = 1; code < 4096; code++)
    {
      const char *name = strerrorname_np (code);
      if (name && strcmp (name, text) == 0)
        {
          *out = (uint32_t)code;
          return 0;
        }
    }
  uint64_t alias = 0;
  if (!nsbox_policy_errno_alias (text, &alias))
    return policy_error (p, node, "unknown errno name '%s'", text);
  *out = (uint32_t)alias;
  return 0;
}

/* allow | log | trap | kill_thread | kill_process | {errno: NAME} and, where
 * allow_default, `default` (the policy's default action). */
static int
parse_action (const struct policy *p, const yaml_node_t *node, bool allow_default, uint32_t *out)
{
  const char *text = scalar_text (node);
  if (text)
    {
      uint64_t named = 0;
      if (allow_default && strcmp (text, "default") == 0)
        *out = p->default_action;
      else if (nsbox_policy_action (text, &named))
        *out = (uint32_t)named;
      else
        return policy_error (p, node, "unknown action '%s'", text);
      return 0;
    }
  if (node->type != YAML_MAPPING_NODE)
    return policy_error (p, node,
                         "expected an action: allow, log, trap, kill_thread, "
                         "kill_process or {errno: NAME}");
  static const char *const keys[] = { "errno" };
  const yaml_node_t *errno_node = NULL;
  int rc = map_fields (p, node, "an action", keys, 1, &errno_node);
  if (rc < 0)
    return rc;
  if (!errno_node)
    return policy_error (p, node, "an action mapping needs 'errno'");
  uint32_t code = 0;
  rc = parse_errno (p, errno_node, &code);
  if (rc < 0)
    return rc;
  *out = SCMP_ACT_ERRNO (code);
  return 0;
}

/* ---- Syscall names -------------------------------------------------------- */

/* Records that a group or conditional entry uses name; a syscall may be
 * decided in one place only. */
static int
claim_syscall (struct policy *p, const yaml_node_t *node, const char *name)
{
  for (size_t i = 0; i < p->claimed_len; i++)
    if (strcmp (p->claimed[i].name, name) == 0)
      return policy_error (p, node, "syscall '%s' is already listed at line %zu", name,
                           p->claimed[i].node->start_mark.line + 1);
  if (p->claimed_len == p->claimed_cap)
    {
      size_t cap = p->claimed_cap ? p->claimed_cap * 2 : 64;
      struct claimed_name *claimed = reallocarray (p->claimed, cap, sizeof *claimed);
      if (!claimed)
        return nsbox_error_oom (p->err);
      p->claimed = claimed;
      p->claimed_cap = cap;
    }
  p->claimed[p->claimed_len++] = (struct claimed_name){ name, node };
  return 0;
}

/* Sets *nr to the native syscall number, or to -1 when there is none: a
 * name libseccomp does not know is skipped with a warning (the default
 * action still applies to it), a name that exists only on other
 * architectures is skipped silently (it cannot be called here). */
static int
resolve_syscall (const struct policy *p, const yaml_node_t *node, const char *name, int *nr)
{
  int number = seccomp_syscall_resolve_name (name);
  *nr = number < 0 ? -1 : number;
  if (number == __NR_SCMP_ERROR)
    return policy_warn (p, node, "unknown syscall '%s' skipped", name);
  return 0;
}

/* ---- groups: unconditional rules ------------------------------------------ */

static int
add_group (struct policy *p, const yaml_node_t *key, const char *group, const yaml_node_t *node)
{
  static const char *const keys[] = { "action", "syscalls" };
  const yaml_node_t *fields[2];
  int rc = map_fields (p, node, "a group", keys, 2, fields);
  if (rc < 0)
    return rc;
  if (!fields[0] || !fields[1])
    return policy_error (p, key, "group '%s' needs 'action' and 'syscalls'", group);
  uint32_t action = 0;
  rc = parse_action (p, fields[0], false, &action);
  if (rc < 0)
    return rc;
  if (fields[1]->type != YAML_SEQUENCE_NODE)
    return policy_error (p, fields[1], "'syscalls' must be a list of syscall names");
  for (int i = 0; i < sequence_length (fields[1]); i++)
    {
      const yaml_node_t *item = sequence_item (p, fields[1], i);
      const char *name = scalar_text (item);
      if (!name)
        return policy_error (p, item ? item : fields[1], "expected a syscall name");
      int nr = -1;
      rc = claim_syscall (p, item, name);
      if (rc == 0)
        rc = resolve_syscall (p, item, name, &nr);
      if (rc < 0)
        return rc;
      /* libseccomp refuses rules whose action is the default action. */
      if (nr < 0 || action == p->default_action)
        continue;
      rc = seccomp_rule_add (p->ctx, action, nr, 0);
      if (rc < 0)
        return rule_error (p, item, name, rc);
    }
  return 0;
}

/* ---- conditional: ordered rules with argument conditions ------------------ */

struct cond_rule
{
  uint32_t action;
  struct box box;
  bool present[SYSCALL_ARGS]; /* some condition restricts this argument */
};

struct conditional
{
  struct arg_space space;
  struct cond_rule *rules;
  size_t len;
  uint32_t else_action;
};

static void
conditional_clear (struct conditional *cond)
{
  for (size_t i = 0; i < cond->len; i++)
    box_clear (&cond->rules[i].box);
  free (cond->rules);
  cond->rules = NULL;
  cond->len = 0;
}

enum cond_key
{
  COND_ARG,
  COND_MASK,
  COND_EQ,
  COND_NE,
  COND_LT,
  COND_LE,
  COND_GT,
  COND_GE,
  COND_IN,
  COND_KEYS
};

static const char *const cond_keys[COND_KEYS]
    = { "arg", "mask", "eq", "ne", "lt", "le", "gt", "ge", "in" };

/* The compact value of `value` under mask; values with bits outside the
 * mask could never compare equal, which is a mistake in the policy. */
static int
compact_value (const struct policy *p, const yaml_node_t *node, uint64_t mask, uint64_t *value)
{
  uint64_t raw = 0;
  int rc = parse_value (p, node, &raw);
  if (rc < 0)
    return rc;
  if (raw & ~mask)
    return policy_error (p, node, "value 0x%" PRIx64 " has bits outside mask 0x%" PRIx64, raw,
                         mask);
  *value = bits_gather (raw, mask);
  return 0;
}

static int
in_set (const struct policy *p, const yaml_node_t *node, uint64_t mask, struct value_set *out)
{
  if (node->type != YAML_SEQUENCE_NODE)
    return policy_error (p, node, "'in' takes a list of values");
  int len = sequence_length (node);
  cleanup_free uint64_t *points = calloc (len ? (size_t)len : 1, sizeof *points);
  if (!points)
    return nsbox_error_oom (p->err);
  for (int i = 0; i < len; i++)
    {
      const yaml_node_t *item = sequence_item (p, node, i);
      int rc = compact_value (p, item ? item : node, mask, &points[i]);
      if (rc < 0)
        return rc;
    }
  if (vset_from_points (points, (size_t)len, out) < 0)
    return nsbox_error_oom (p->err);
  return 0;
}

/* The set of compact values the operator `op` with operand `node` accepts. */
static int
condition_set (const struct policy *p, const yaml_node_t *node, enum cond_key op, uint64_t mask,
               struct value_set *out)
{
  if (op == COND_IN)
    return in_set (p, node, mask, out);
  uint64_t max = mask_max (mask), value = 0;
  struct value_set point = { NULL, 0 };
  int rc = compact_value (p, node, mask, &value);
  if (rc < 0)
    return rc;
  switch (op)
    {
    case COND_EQ:
      rc = vset_span (out, value, value);
      break;
    case COND_NE:
      rc = vset_span (&point, value, value);
      if (rc == 0)
        rc = vset_complement (&point, max, out);
      vset_clear (&point);
      break;
    /* Gathering bits keeps their order, so (arg & mask) < v holds exactly
     * when the compact values compare the same way. */
    case COND_LT:
      rc = value == 0 ? vset_span (out, 1, 0) : vset_span (out, 0, value - 1);
      break;
    case COND_LE:
      rc = vset_span (out, 0, value);
      break;
    case COND_GT:
      rc = value == max ? vset_span (out, 1, 0) : vset_span (out, value + 1, max);
      break;
    case COND_GE:
      rc = vset_span (out, value, max);
      break;
    case COND_ARG:
    case COND_MASK:
    case COND_IN:
    case COND_KEYS:
      return -EINVAL;
    }
  return rc < 0 ? nsbox_error_oom (p->err) : 0;
}

/* Fixes the mask of argument arg for the whole syscall: rules must agree on
 * it so that all of them live in one compact space. */
static int
fix_mask (const struct policy *p, const yaml_node_t *node, struct arg_space *space, unsigned arg,
          uint64_t mask)
{
  if (!space->fixed[arg])
    {
      space->fixed[arg] = true;
      space->mask[arg] = mask;
      return 0;
    }
  if (space->mask[arg] != mask)
    return policy_error (p, node,
                         "arg %u is compared under mask 0x%" PRIx64
                         " elsewhere in this syscall's rules; use one mask per argument",
                         arg, space->mask[arg]);
  return 0;
}

/* Reads arg, mask and the operator of one condition. */
static int
condition_head (const struct policy *p, const yaml_node_t *node, const yaml_node_t **fields,
                unsigned *arg, uint64_t *mask, enum cond_key *op)
{
  uint64_t number = 0;
  if (!fields[COND_ARG])
    return policy_error (p, node, "a condition needs 'arg'");
  int rc = parse_value (p, fields[COND_ARG], &number);
  if (rc < 0)
    return rc;
  if (number >= SYSCALL_ARGS)
    return policy_error (p, fields[COND_ARG], "'arg' must be 0 to 5");
  *arg = (unsigned)number;
  int found = 0;
  for (int k = COND_EQ; k < COND_KEYS; k++)
    if (fields[k])
      {
        *op = (enum cond_key)k;
        found++;
      }
  if (found != 1)
    return policy_error (p, node, "a condition takes exactly one of eq, ne, lt, le, gt, ge, in");
  *mask = UINT64_MAX;
  if (!fields[COND_MASK])
    return 0;
  rc = parse_value (p, fields[COND_MASK], mask);
  if (rc < 0)
    return rc;
  if (*mask == 0)
    return policy_error (p, fields[COND_MASK], "'mask' must not be 0");
  return 0;
}

/* Adds one condition to a rule; several conditions on one argument
 * intersect. */
static int
parse_condition (const struct policy *p, const yaml_node_t *node, struct conditional *cond,
                 struct cond_rule *rule)
{
  const yaml_node_t *fields[COND_KEYS];
  unsigned arg = 0;
  uint64_t mask = 0;
  enum cond_key op = COND_EQ;
  int rc = map_fields (p, node, "a condition", cond_keys, COND_KEYS, fields);
  if (rc == 0)
    rc = condition_head (p, node, fields, &arg, &mask, &op);
  if (rc == 0)
    rc = fix_mask (p, node, &cond->space, arg, mask);
  if (rc < 0)
    return rc;
  struct value_set set = { NULL, 0 };
  rc = condition_set (p, fields[op], op, mask, &set);
  if (rc < 0)
    return rc;
  if (!rule->present[arg])
    {
      rule->box.args[arg] = set;
      rule->present[arg] = true;
      return 0;
    }
  struct value_set both = { NULL, 0 };
  rc = vset_intersect (&rule->box.args[arg], &set, &both);
  vset_clear (&set);
  if (rc < 0)
    return nsbox_error_oom (p->err);
  vset_clear (&rule->box.args[arg]);
  rule->box.args[arg] = both;
  return 0;
}

static int
parse_rule (const struct policy *p, const yaml_node_t *node, struct conditional *cond,
            struct cond_rule *rule)
{
  static const char *const keys[] = { "action", "when" };
  const yaml_node_t *fields[2];
  int rc = map_fields (p, node, "a rule", keys, 2, fields);
  if (rc < 0)
    return rc;
  if (!fields[0])
    return policy_error (p, node, "a rule needs 'action'");
  rc = parse_action (p, fields[0], true, &rule->action);
  if (rc < 0 || !fields[1])
    return rc;
  if (fields[1]->type != YAML_SEQUENCE_NODE)
    return policy_error (p, fields[1], "'when' must be a list of conditions");
  for (int i = 0; i < sequence_length (fields[1]) && rc == 0; i++)
    {
      const yaml_node_t *item = sequence_item (p, fields[1], i);
      rc = item ? parse_condition (p, item, cond, rule)
                : policy_error (p, fields[1], "expected a condition");
    }
  return rc;
}

/* Arguments a rule does not restrict take every value of their space; done
 * after all rules are read, when every argument's mask is known. */
static int
complete_rules (const struct policy *p, struct conditional *cond)
{
  for (size_t i = 0; i < cond->len; i++)
    for (unsigned k = 0; k < SYSCALL_ARGS; k++)
      if (!cond->rules[i].present[k]
          && vset_span (&cond->rules[i].box.args[k], 0, mask_max (cond->space.mask[k])) < 0)
        return nsbox_error_oom (p->err);
  return 0;
}

static int
parse_conditional (const struct policy *p, const yaml_node_t *key, const yaml_node_t *node,
                   struct conditional *cond)
{
  static const char *const keys[] = { "rules", "else" };
  const yaml_node_t *fields[2];
  int rc = map_fields (p, node, "a conditional entry", keys, 2, fields);
  if (rc < 0)
    return rc;
  if (!fields[0])
    return policy_error (p, key, "a conditional entry needs 'rules'");
  if (fields[0]->type != YAML_SEQUENCE_NODE)
    return policy_error (p, fields[0], "'rules' must be a list of rules");
  int len = sequence_length (fields[0]);
  cond->rules = calloc (len ? (size_t)len : 1, sizeof *cond->rules);
  if (!cond->rules)
    return nsbox_error_oom (p->err);
  for (int i = 0; i < len; i++)
    {
      const yaml_node_t *item = sequence_item (p, fields[0], i);
      cond->len++;
      rc = item ? parse_rule (p, item, cond, &cond->rules[i])
                : policy_error (p, fields[0], "expected a rule");
      if (rc < 0)
        return rc;
    }
  cond->else_action = p->default_action;
  if (fields[1])
    rc = parse_action (p, fields[1], true, &cond->else_action);
  return rc < 0 ? rc : complete_rules (p, cond);
}

/* Emits one box as rules: the cartesian product of the comparisons that
 * cover each restricted argument. */
static int
emit_box (const struct policy *p, const yaml_node_t *node, const char *name, int nr,
          uint32_t action, const struct arg_space *space, const struct box *box, size_t *emitted)
{
  struct cmp_list per_arg[SYSCALL_ARGS] = { { 0 } };
  size_t used = 0, pick[SYSCALL_ARGS] = { 0 };
  int rc = 0;
  for (unsigned k = 0; k < SYSCALL_ARGS && rc == 0; k++)
    if (!vset_is_full (&box->args[k], mask_max (space->mask[k])))
      rc = vset_to_cmps (&box->args[k], k, space->mask[k], &per_arg[used++]);
  if (rc < 0)
    rc = nsbox_error_oom (p->err);
  while (rc == 0)
    {
      struct scmp_arg_cmp cmps[SYSCALL_ARGS];
      for (size_t i = 0; i < used; i++)
        cmps[i] = per_arg[i].items[pick[i]];
      ++*emitted;
      rc = seccomp_rule_add_array (p->ctx, action, nr, (unsigned)used, cmps);
      if (rc < 0)
        rc = rule_error (p, node, name, rc);
      size_t i = 0;
      while (i < used && ++pick[i] == per_arg[i].len)
        pick[i++] = 0;
      if (i == used)
        break;
    }
  for (size_t i = 0; i < used; i++)
    cmp_list_clear (&per_arg[i]);
  return rc;
}

/* The region rule `index` decides (index == len: the else region): its own
 * box minus the boxes of every earlier rule. */
static int
rule_region (const struct conditional *cond, size_t index, struct box_list *region)
{
  struct box start;
  int rc = index < cond->len ? box_copy (&cond->rules[index].box, &start)
                             : box_full (&cond->space, &start);
  if (rc == 0)
    rc = box_list_take (region, &start);
  for (size_t j = 0; j < index && rc == 0; j++)
    rc = box_list_subtract (region, &cond->rules[j].box, &cond->space);
  return rc;
}

/* The number of rules emit_box would add for box. */
static int
box_rule_count (const struct arg_space *space, const struct box *box, size_t *count)
{
  size_t product = 1;
  for (unsigned k = 0; k < SYSCALL_ARGS; k++)
    {
      if (vset_is_full (&box->args[k], mask_max (space->mask[k])))
        continue;
      struct cmp_list cmps = { 0 };
      int rc = vset_to_cmps (&box->args[k], k, space->mask[k], &cmps);
      size_t len = cmps.len;
      cmp_list_clear (&cmps);
      if (rc < 0)
        return rc;
      product = len && product > (SIZE_MAX / 2) / len ? SIZE_MAX / 2 : product * len;
    }
  *count += product;
  return 0;
}

/* Emits the rules of every region whose action is not the default action
 * (libseccomp refuses those; regions left without a rule fall through to
 * the default action anyway). With count_only, only counts them, so an
 * oversized syscall is refused before libseccomp spends time on it:
 * insertion time in libseccomp 2.5 grows faster than linearly. */
static int
emit_regions (const struct policy *p, const yaml_node_t *node, const char *name, int nr,
              const struct conditional *cond, bool count_only, size_t *emitted)
{
  for (size_t i = 0; i <= cond->len; i++)
    {
      uint32_t action = i < cond->len ? cond->rules[i].action : cond->else_action;
      if (action == p->default_action)
        continue;
      __attribute__ ((cleanup (box_list_clear))) struct box_list region = { 0 };
      int rc = rule_region (cond, i, &region);
      if (rc == -E2BIG)
        return policy_error (p, node,
                             "the rules of '%s' split into more than %d regions; "
                             "simplify its conditions",
                             name, MAX_REGION_BOXES);
      for (size_t b = 0; b < region.len && rc == 0; b++)
        rc = count_only
                 ? box_rule_count (&cond->space, &region.items[b], emitted)
                 : emit_box (p, node, name, nr, action, &cond->space, &region.items[b], emitted);
      if (rc == -ENOMEM)
        return nsbox_error_oom (p->err);
      if (rc < 0)
        return rc;
    }
  return 0;
}

static int
emit_conditional (const struct policy *p, const yaml_node_t *node, const char *name, int nr,
                  const struct conditional *cond)
{
  size_t count = 0, emitted = 0;
  int rc = emit_regions (p, node, name, nr, cond, true, &count);
  if (rc < 0)
    return rc;
  if (count > MAX_RULES_PER_SYSCALL)
    return policy_error (p, node, "'%s' needs %zu rules (limit %d); simplify its conditions", name,
                         count, MAX_RULES_PER_SYSCALL);
  return emit_regions (p, node, name, nr, cond, false, &emitted);
}

static int
add_conditional (struct policy *p, const yaml_node_t *key, const char *name,
                 const yaml_node_t *node)
{
  __attribute__ ((cleanup (conditional_clear))) struct conditional cond = { 0 };
  for (unsigned k = 0; k < SYSCALL_ARGS; k++)
    cond.space.mask[k] = UINT64_MAX;
  int nr = -1;
  int rc = claim_syscall (p, key, name);
  if (rc == 0)
    rc = parse_conditional (p, key, node, &cond);
  if (rc == 0)
    rc = resolve_syscall (p, key, name, &nr);
  if (rc < 0 || nr < 0)
    return rc;
  return emit_conditional (p, key, name, nr, &cond);
}

/* ---- The whole policy ----------------------------------------------------- */

static int
check_version (const struct policy *p, const yaml_node_t *node)
{
  const char *text = scalar_text (node);
  if (!text || strcmp (text, "1") != 0)
    return policy_error (p, node, "unsupported policy version '%s' (expected 1)",
                         text ? text : "?");
  return 0;
}

static int
filter_init (struct policy *p, uint32_t bad_arch_action)
{
  /* The launcher sets no_new_privs itself, before installing the program;
   * the binary tree keeps lookups logarithmic in the number of syscalls. */
  const struct
  {
    enum scmp_filter_attr attr;
    uint32_t value;
    const char *name;
  } attrs[] = {
    { SCMP_FLTATR_ACT_BADARCH, bad_arch_action, "bad-arch action" },
    { SCMP_FLTATR_CTL_NNP, 0, "no_new_privs" },
    { SCMP_FLTATR_CTL_OPTIMIZE, 2, "optimize" },
  };
  p->ctx = seccomp_init (p->default_action);
  if (!p->ctx)
    return nsbox_error_set (p->err, EINVAL, "%s: initialise libseccomp with the default action",
                            p->name);
  for (size_t i = 0; i < ARRAY_SIZE (attrs); i++)
    {
      int rc = seccomp_attr_set (p->ctx, attrs[i].attr, attrs[i].value);
      if (rc < 0)
        return nsbox_error_sys (p->err, -rc, "%s: set libseccomp %s", p->name, attrs[i].name);
    }
  return 0;
}

enum top_key
{
  TOP_VERSION,
  TOP_DEFAULT_ACTION,
  TOP_BAD_ARCH_ACTION,
  TOP_GROUPS,
  TOP_CONDITIONAL,
  TOP_KEYS
};

static const char *const top_keys[TOP_KEYS]
    = { "version", "default_action", "bad_arch_action", "groups", "conditional" };

static int
build_filter (struct policy *p, const yaml_node_t *root)
{
  const yaml_node_t *fields[TOP_KEYS];
  int rc = map_fields (p, root, "the policy", top_keys, TOP_KEYS, fields);
  if (rc < 0)
    return rc;
  if (!fields[TOP_VERSION])
    return policy_error (p, root, "the policy needs 'version: 1'");
  if (!fields[TOP_DEFAULT_ACTION])
    return policy_error (p, root, "the policy needs 'default_action'");
  uint32_t bad_arch_action = SCMP_ACT_KILL_PROCESS;
  rc = check_version (p, fields[TOP_VERSION]);
  if (rc == 0)
    rc = parse_action (p, fields[TOP_DEFAULT_ACTION], false, &p->default_action);
  if (rc == 0 && fields[TOP_BAD_ARCH_ACTION])
    rc = parse_action (p, fields[TOP_BAD_ARCH_ACTION], false, &bad_arch_action);
  if (rc < 0)
    return rc;
  if (bad_arch_action == SCMP_ACT_ALLOW || bad_arch_action == SCMP_ACT_LOG)
    return policy_error (p, fields[TOP_BAD_ARCH_ACTION],
                         "'bad_arch_action' must refuse the call: foreign-ABI syscalls "
                         "would bypass every rule");
  rc = filter_init (p, bad_arch_action);
  if (rc == 0 && fields[TOP_GROUPS])
    rc = for_each_entry (p, fields[TOP_GROUPS], "'groups'", add_group);
  if (rc == 0 && fields[TOP_CONDITIONAL])
    rc = for_each_entry (p, fields[TOP_CONDITIONAL], "'conditional'", add_conditional);
  return rc;
}

/* ---- YAML loading ----------------------------------------------------------- */

struct yaml_state
{
  yaml_parser_t parser;
  yaml_document_t doc;
  bool parser_ready;
  bool doc_ready;
};

static void
yaml_state_clear (struct yaml_state *state)
{
  if (state->doc_ready)
    yaml_document_delete (&state->doc);
  if (state->parser_ready)
    yaml_parser_delete (&state->parser);
}

static int
yaml_failure (const yaml_parser_t *parser, const char *name, struct nsbox_error **err)
{
  if (parser->error == YAML_MEMORY_ERROR)
    return nsbox_error_set (err, ENOMEM, "%s: out of memory while parsing", name);
  const yaml_mark_t *mark = &parser->problem_mark;
  return nsbox_error_set (err, EBADMSG, "%s:%zu:%zu: %s%s%s%s", name, mark->line + 1,
                          mark->column + 1, parser->problem ? parser->problem : "invalid YAML",
                          parser->context ? " (" : "", parser->context ? parser->context : "",
                          parser->context ? ")" : "");
}

static int
load_document (struct yaml_state *state, const char *text, size_t len, const char *name,
               struct nsbox_error **err)
{
  if (!yaml_parser_initialize (&state->parser))
    return nsbox_error_set (err, ENOMEM, "%s: initialise the YAML parser", name);
  state->parser_ready = true;
  yaml_parser_set_input_string (&state->parser, (const unsigned char *)text, len);
  if (!yaml_parser_load (&state->parser, &state->doc))
    return yaml_failure (&state->parser, name, err);
  state->doc_ready = true;
  if (!yaml_document_get_root_node (&state->doc))
    return nsbox_error_set (err, EBADMSG, "%s:1:1: the policy is empty", name);
  yaml_document_t extra;
  if (!yaml_parser_load (&state->parser, &extra))
    return yaml_failure (&state->parser, name, err);
  bool more = yaml_document_get_root_node (&extra) != NULL;
  yaml_mark_t mark = extra.start_mark;
  yaml_document_delete (&extra);
  if (more)
    return nsbox_error_set (err, EBADMSG, "%s:%zu:%zu: more than one YAML document", name,
                            mark.line + 1, mark.column + 1);
  return 0;
}

int
nsbox_seccomp_policy_build (const char *text, size_t len, const char *name, nsbox_warning_fn warn,
                            void *warn_data, scmp_filter_ctx *out, struct nsbox_error **err)
{
  __attribute__ ((cleanup (yaml_state_clear))) struct yaml_state yaml = { 0 };
  __attribute__ ((cleanup (policy_clear))) struct policy policy = { 0 };
  int rc = load_document (&yaml, text, len, name, err);
  if (rc < 0)
    return rc;
  policy.name = name;
  policy.doc = &yaml.doc;
  policy.warn = warn;
  policy.warn_data = warn_data;
  policy.err = err;
  rc = build_filter (&policy, yaml_document_get_root_node (&yaml.doc));
  if (rc < 0)
    return rc;
  *out = TAKE_PTR (policy.ctx);
  return 0;
}
