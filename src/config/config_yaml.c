/* The configuration from a YAML file: see config.h for the errors. The
 * file is read through libyaml's event parser so that every node's
 * position is known and anchors, aliases and extra documents can be refused
 * before anything is applied. Values land in a copy of the configuration
 * that replaces the original only when the whole file is good. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config.h"
#include "config_keys.h"
#include "error.h"
#include "fileio.h"
#include "util.h"

#define CONFIG_FILE_MAX (1024 * 1024)

struct config_loader
{
  const char *path;
  const char *text;
  size_t text_len;
  yaml_parser_t parser;
  nsbox_config *config;
  struct nsbox_error **err;
};

/* Fails with "FILE:LINE:COL: message", taking message (NULL when it could
 * not be formatted). */
static int
fail_at (struct config_loader *loader, const yaml_mark_t *mark, char *message)
{
  if (!message)
    return nsbox_error_oom (loader->err);
  nsbox_error_set (loader->err, EBADMSG, "%s:%zu:%zu: %s", loader->path, mark->line + 1,
                   mark->column + 1, message);
  free (message);
  return -EBADMSG;
}

/* libyaml reports reader errors (bad encoding, control characters) as a
 * byte offset only. */
static yaml_mark_t
mark_of_offset (const char *text, size_t text_len, size_t offset)
{
  yaml_mark_t mark = { offset, 0, 0 };
  for (size_t i = 0; i < offset && i < text_len; i++)
    if (text[i] == '\n')
      {
        mark.line++;
        mark.column = 0;
      }
    else if (((unsigned char)text[i] & 0xc0) != 0x80)
      mark.column++;
  return mark;
}

static int
parser_failed (struct config_loader *loader)
{
  const yaml_parser_t *parser = &loader->parser;
  if (parser->error == YAML_MEMORY_ERROR)
    return nsbox_error_oom (loader->err);
  yaml_mark_t mark = parser->problem_mark;
  if (parser->error == YAML_READER_ERROR)
    mark = mark_of_offset (loader->text, loader->text_len, parser->problem_offset);
  const char *problem = parser->problem ? parser->problem : "invalid YAML";
  if (parser->context)
    return fail_at (loader, &mark, xasprintf ("%s (%s)", problem, parser->context));
  return fail_at (loader, &mark, strdup (problem));
}

/* Reads the next event and refuses what the configuration never uses:
 * aliases, anchors and tags. */
static int
next_event (struct config_loader *loader, yaml_event_t *event)
{
  if (!yaml_parser_parse (&loader->parser, event))
    return parser_failed (loader);
  const yaml_char_t *anchor = NULL, *tag = NULL;
  if (event->type == YAML_ALIAS_EVENT)
    return fail_at (loader, &event->start_mark, xasprintf ("aliases are not supported"));
  if (event->type == YAML_SCALAR_EVENT)
    {
      anchor = event->data.scalar.anchor;
      tag = event->data.scalar.tag;
    }
  else if (event->type == YAML_SEQUENCE_START_EVENT)
    {
      anchor = event->data.sequence_start.anchor;
      tag = event->data.sequence_start.tag;
    }
  else if (event->type == YAML_MAPPING_START_EVENT)
    {
      anchor = event->data.mapping_start.anchor;
      tag = event->data.mapping_start.tag;
    }
  if (anchor)
    return fail_at (loader, &event->start_mark, xasprintf ("anchors are not supported"));
  if (tag)
    return fail_at (loader, &event->start_mark, xasprintf ("tags are not supported"));
  return 0;
}

static const char *
node_kind (const yaml_event_t *event)
{
  if (event->type == YAML_SCALAR_EVENT)
    return "a scalar";
  if (event->type == YAML_SEQUENCE_START_EVENT)
    return "a list";
  if (event->type == YAML_MAPPING_START_EVENT)
    return "a mapping";
  return "nothing";
}

static int
wrong_type (struct config_loader *loader, const yaml_event_t *event, const char *key,
            const char *expected)
{
  return fail_at (
      loader, &event->start_mark,
      xasprintf ("wrong type for '%s': expected %s, found %s", key, expected, node_kind (event)));
}

/* The text of a scalar event; NUL can only come from an escape. */
static int
scalar_text (struct config_loader *loader, const yaml_event_t *event, const char **text)
{
  const char *value = (const char *)event->data.scalar.value;
  if (strlen (value) != event->data.scalar.length)
    return fail_at (loader, &event->start_mark,
                    xasprintf ("values must not contain a NUL character"));
  *text = value;
  return 0;
}

static bool
is_null_scalar (const yaml_event_t *event)
{
  static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };
  if (event->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  for (size_t i = 0; i < ARRAY_SIZE (nulls); i++)
    if (strcmp ((const char *)event->data.scalar.value, nulls[i]) == 0)
      return true;
  return false;
}

/* Applies one value through the key's setter; its message gains the
 * position. */
static int
apply_at (struct config_loader *loader, const yaml_mark_t *mark, const struct config_key *key,
          const char *value)
{
  cleanup_error struct nsbox_error *error = NULL;
  int r = nsbox_config_key_set (loader->config, key, value, &error);
  if (r == -ENOMEM)
    return nsbox_error_oom (loader->err);
  if (r < 0)
    return fail_at (loader, mark, strdup (nsbox_error_message (error)));
  return 0;
}

static int
load_scalar (struct config_loader *loader, const struct config_key *key, yaml_event_t *value)
{
  const char *text = NULL;
  if (value->type != YAML_SCALAR_EVENT)
    return wrong_type (loader, value, key->name, "a scalar");
  if (is_null_scalar (value))
    {
      if (!(key->flags & KEY_NULLABLE))
        return fail_at (loader, &value->start_mark,
                        xasprintf ("missing value for '%s'", key->name));
      return apply_at (loader, &value->start_mark, key, "");
    }
  int r = scalar_text (loader, value, &text);
  if (r < 0)
    return r;
  return apply_at (loader, &value->start_mark, key, text);
}

/* One entry of an env mapping, NAME: VALUE, from its name on. */
static int
load_env_pair (struct config_loader *loader, const struct config_key *key, yaml_event_t *name)
{
  cleanup_yaml_event yaml_event_t value = { 0 };
  const char *name_text = NULL, *value_text = NULL;
  int r = scalar_text (loader, name, &name_text);
  if (r < 0)
    return r;
  size_t name_len = nsbox_env_name_length (name_text);
  if (name_len == 0 || name_text[name_len] != '\0')
    {
      char shown[SHOWN_SIZE];
      nsbox_config_show_value (name_text, shown, sizeof shown);
      return fail_at (
          loader, &name->start_mark,
          xasprintf ("invalid variable name in '%s': '%s' (expected letters, digits and "
                     "underscores not starting with a digit)",
                     key->name, shown));
    }
  if ((r = next_event (loader, &value)) < 0)
    return r;
  if (value.type != YAML_SCALAR_EVENT)
    return wrong_type (loader, &value, key->name, "a string value");
  if ((r = scalar_text (loader, &value, &value_text)) < 0)
    return r;
  cleanup_free char *entry = xasprintf ("%s=%s", name_text, value_text);
  if (!entry)
    return nsbox_error_oom (loader->err);
  return apply_at (loader, &value.start_mark, key, entry);
}

static int
load_env_mapping (struct config_loader *loader, const struct config_key *key)
{
  cleanup_free char **seen = NULL; /* copies of the names so far */
  size_t seen_len = 0;
  int r = 0;
  for (;;)
    {
      cleanup_yaml_event yaml_event_t name = { 0 };
      if ((r = next_event (loader, &name)) < 0)
        break;
      if (name.type == YAML_MAPPING_END_EVENT)
        break;
      if (name.type != YAML_SCALAR_EVENT)
        {
          r = wrong_type (loader, &name, key->name, "variable names");
          break;
        }
      const char *text = (const char *)name.data.scalar.value;
      for (size_t i = 0; i < seen_len && r == 0; i++)
        if (strcmp (seen[i], text) == 0)
          r = fail_at (loader, &name.start_mark,
                       xasprintf ("duplicate key '%s' in '%s'", seen[i], key->name));
      if (r < 0 || (r = load_env_pair (loader, key, &name)) < 0)
        break;
      if (nsbox_strv_append (&seen, &seen_len, strdup (text)) < 0)
        {
          r = nsbox_error_oom (loader->err);
          break;
        }
    }
  for (size_t i = 0; i < seen_len; i++)
    free (seen[i]);
  return r;
}

/* Each string of a sequence applied to `key` in turn, like a repeated
 * flag. */
static int
load_string_list (struct config_loader *loader, const struct config_key *key, const char *expected,
                  bool empty_ok)
{
  for (;;)
    {
      cleanup_yaml_event yaml_event_t item = { 0 };
      const char *text = NULL;
      int r = next_event (loader, &item);
      if (r < 0)
        return r;
      if (item.type == YAML_SEQUENCE_END_EVENT)
        return 0;
      if (item.type != YAML_SCALAR_EVENT || (!empty_ok && is_null_scalar (&item)))
        return wrong_type (loader, &item, key->name, expected);
      if ((r = scalar_text (loader, &item, &text)) < 0)
        return r;
      if (!empty_ok && (!text || *text == '\0'))
        return fail_at (loader, &item.start_mark, xasprintf ("empty entry in '%s'", key->name));
      if ((r = apply_at (loader, &item.start_mark, key, text)) < 0)
        return r;
    }
}

/* env adds to (or replaces variables of) what is already set, like the
 * setter does. */
static int
load_env (struct config_loader *loader, const struct config_key *key, yaml_event_t *value)
{
  if (value->type == YAML_MAPPING_START_EVENT)
    return load_env_mapping (loader, key);
  if (value->type == YAML_SEQUENCE_START_EVENT)
    return load_string_list (loader, key, "NAME=VALUE strings", true);
  return wrong_type (loader, value, key->name, "a mapping or a list");
}

/* inputs: a list of strings, one string, or null (clears the list). */
static int
load_list (struct config_loader *loader, const struct config_key *key, yaml_event_t *value)
{
  if (value->type == YAML_SCALAR_EVENT)
    return load_scalar (loader, key, value);
  if (value->type != YAML_SEQUENCE_START_EVENT)
    return wrong_type (loader, value, key->name, "a list of strings");
  return load_string_list (loader, key, "strings", false);
}

static int
set_command_at (struct config_loader *loader, const yaml_mark_t *mark, const char *const *argv,
                size_t argc)
{
  cleanup_error struct nsbox_error *error = NULL;
  int r = nsbox_config_set_command (loader->config, argc, argv, &error);
  if (r == -ENOMEM)
    return nsbox_error_oom (loader->err);
  if (r < 0)
    return fail_at (loader, mark, strdup (nsbox_error_message (error)));
  return 0;
}

static int
load_command_list (struct config_loader *loader, const struct config_key *key,
                   const yaml_mark_t *start)
{
  char **argv = NULL;
  size_t argc = 0;
  int r;
  for (;;)
    {
      cleanup_yaml_event yaml_event_t item = { 0 };
      const char *text = NULL;
      if ((r = next_event (loader, &item)) < 0)
        break;
      if (item.type == YAML_SEQUENCE_END_EVENT)
        {
          r = set_command_at (loader, start, (const char *const *)argv, argc);
          break;
        }
      if (item.type != YAML_SCALAR_EVENT)
        {
          r = wrong_type (loader, &item, key->name, "strings");
          break;
        }
      if ((r = scalar_text (loader, &item, &text)) < 0)
        break;
      if (argc >= COMMAND_MAX)
        {
          r = fail_at (loader, &item.start_mark,
                       xasprintf ("too many entries in '%s' (at most %d)", key->name, COMMAND_MAX));
          break;
        }
      if (nsbox_strv_append (&argv, &argc, strdup (text)) < 0)
        {
          r = nsbox_error_oom (loader->err);
          break;
        }
    }
  nsbox_strv_free (argv);
  return r;
}

/* command in a file replaces the whole command: a list of arguments, or one
 * string taken as a single argument (never split like a shell would). */
static int
load_command (struct config_loader *loader, const struct config_key *key, yaml_event_t *value)
{
  if (value->type == YAML_SEQUENCE_START_EVENT)
    return load_command_list (loader, key, &value->start_mark);
  if (value->type != YAML_SCALAR_EVENT)
    return wrong_type (loader, value, key->name, "a list or a string");
  const char *text = NULL;
  if (is_null_scalar (value))
    return fail_at (loader, &value->start_mark, xasprintf ("missing value for '%s'", key->name));
  int r = scalar_text (loader, value, &text);
  if (r < 0)
    return r;
  const char *argv[] = { text, NULL };
  return set_command_at (loader, &value->start_mark, argv, 1);
}

static int
load_entry (struct config_loader *loader, yaml_event_t *name, uint64_t *seen)
{
  const char *text = NULL;
  if (name->type != YAML_SCALAR_EVENT)
    return fail_at (loader, &name->start_mark,
                    xasprintf ("expected a key, found %s", node_kind (name)));
  int r = scalar_text (loader, name, &text);
  if (r < 0)
    return r;
  const struct config_key *key = nsbox_config_find_key (text);
  if (!key)
    {
      char shown[SHOWN_SIZE];
      nsbox_config_show_value (text, shown, sizeof shown);
      return fail_at (loader, &name->start_mark, xasprintf ("unknown key '%s'", shown));
    }
  uint64_t bit = 1ULL << nsbox_config_key_index (key);
  if (*seen & bit)
    return fail_at (loader, &name->start_mark, xasprintf ("duplicate key '%s'", key->name));
  *seen |= bit;
  cleanup_yaml_event yaml_event_t value = { 0 };
  if ((r = next_event (loader, &value)) < 0)
    return r;
  switch (key->yaml)
    {
    case YAML_SCALAR:
      return load_scalar (loader, key, &value);
    case YAML_LIST:
      return load_list (loader, key, &value);
    case YAML_ENV:
      return load_env (loader, key, &value);
    case YAML_COMMAND:
      return load_command (loader, key, &value);
    }
  return -EINVAL;
}

static int
load_top_mapping (struct config_loader *loader)
{
  cleanup_yaml_event yaml_event_t start = { 0 };
  int r = next_event (loader, &start);
  if (r < 0)
    return r;
  if (start.type != YAML_MAPPING_START_EVENT)
    return fail_at (loader, &start.start_mark,
                    xasprintf ("expected a mapping of keys, found %s", node_kind (&start)));
  uint64_t seen = 0;
  for (;;)
    {
      cleanup_yaml_event yaml_event_t name = { 0 };
      if ((r = next_event (loader, &name)) < 0)
        return r;
      if (name.type == YAML_MAPPING_END_EVENT)
        return 0;
      if ((r = load_entry (loader, &name, &seen)) < 0)
        return r;
    }
}

/* Expects `type` next; anything else is a document structure error. */
static int
expect_event (struct config_loader *loader, yaml_event_type_t type, const char *problem)
{
  cleanup_yaml_event yaml_event_t event = { 0 };
  int r = next_event (loader, &event);
  if (r < 0)
    return r;
  if (event.type != type)
    return fail_at (loader, &event.start_mark, strdup (problem));
  return 0;
}

/* A stream without any document (an empty or all-comment file) changes
 * nothing. */
static int
load_stream (struct config_loader *loader)
{
  cleanup_yaml_event yaml_event_t start = { 0 };
  cleanup_yaml_event yaml_event_t document = { 0 };
  int r;
  if ((r = next_event (loader, &start)) < 0 || (r = next_event (loader, &document)) < 0)
    return r;
  if (document.type == YAML_STREAM_END_EVENT)
    return 0;
  if ((r = load_top_mapping (loader)) < 0)
    return r;
  if ((r = expect_event (loader, YAML_DOCUMENT_END_EVENT, "expected the end of the document")) < 0)
    return r;
  return expect_event (loader, YAML_STREAM_END_EVENT, "multiple documents are not supported");
}

static void
swap_config (nsbox_config *a, nsbox_config *b)
{
  nsbox_config saved = *a;
  *a = *b;
  *b = saved;
}

int
nsbox_config_load_yaml (nsbox_config *config, const char *path, struct nsbox_error **err)
{
  if (!config || !path)
    return nsbox_error_set (err, EINVAL, "no configuration or path given");
  cleanup_free char *text = NULL;
  size_t text_len = 0;
  int r = nsbox_read_file (path, CONFIG_FILE_MAX, "config", &text, &text_len, err);
  if (r < 0)
    return r;
  cleanup_config nsbox_config *copy = nsbox_config_dup (config, err);
  if (!copy)
    return -ENOMEM;
  struct config_loader loader
      = { .path = path, .text = text, .text_len = text_len, .config = copy, .err = err };
  if (!yaml_parser_initialize (&loader.parser))
    return nsbox_error_oom (err);
  yaml_parser_set_input_string (&loader.parser, (const unsigned char *)text, text_len);
  r = load_stream (&loader);
  yaml_parser_delete (&loader.parser);
  if (r < 0)
    return r;
  swap_config (config, copy);
  return 0;
}
