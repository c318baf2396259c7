/* The key list of nsbox.yaml(5), written at build time from the table of
 * keys (src/config/config_keys.c), so that the manual cannot drift from
 * the vocabulary: `mankeys TEMPLATE OUTPUT` copies TEMPLATE with its line
 * `.\" KEYS` replaced by one entry per key (its name, what its value looks
 * like, its flag, its default read from a new configuration, and its
 * documentation). A key without documentation is an error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_keys.h"
#include "error.h"
#include "fileio.h"

/* Text for roff: backslashes escaped, a line never starts a request. */
static void
put_text (FILE *out, const char *text)
{
  bool line_start = true;
  for (const char *c = text; *c; c++)
    {
      if (line_start && (*c == '.' || *c == '\''))
        fputs ("\\&", out);
      if (*c == '\\')
        fputs ("\\e", out);
      else if (*c == '-')
        fputs ("\\-", out);
      else
        fputc (*c, out);
      line_start = *c == '\n';
    }
}

static int
put_key (FILE *out, const nsbox_config *defaults, const struct config_key *key)
{
  if (!key->doc || strlen (key->doc) < 20)
    {
      fprintf (stderr, "mankeys: key '%s' has no documentation in the table\n", key->name);
      return -1;
    }
  cleanup_free char *dflt = nsbox_config_key_get (defaults, key);
  if (!dflt)
    return -1;
  fputs (".TP\n.B ", out);
  put_text (out, key->name);
  fputs ("\n", out);
  put_text (out, key->doc);
  fputs ("\n.RS\n.PP\nValue: ", out);
  put_text (out, key->expected);
  fputs (".\n.br\nDefault: ", out);
  put_text (out, *dflt ? dflt : "unset");
  fputs (".\n.br\nFlag: \\fB\\-\\-", out);
  put_text (out, strcmp (key->name, "inputs") == 0 ? "input" : key->name);
  fputs (key->flags & KEY_BOOLEAN ? "\\fR" : "\\fR \\fIVALUE\\fR", out);
  if (key->flags & KEY_REPEATABLE)
    fputs (", repeatable (a YAML list)", out);
  if (key->flags & KEY_NULLABLE)
    fputs ("; an empty value or a YAML null unsets it", out);
  fputs (".\n.RE\n", out);
  return 0;
}

int
main (int argc, char **argv)
{
  if (argc != 3)
    {
      fprintf (stderr, "usage: mankeys TEMPLATE OUTPUT\n");
      return 2;
    }
  cleanup_error struct nsbox_error *err = NULL;
  cleanup_free char *template = NULL;
  size_t len;
  if (nsbox_read_file (argv[1], 1 << 20, "template", &template, &len, &err) < 0)
    {
      fprintf (stderr, "mankeys: %s\n", nsbox_error_message (err));
      return 1;
    }
  const char *mark = strstr (template, "\n.\\\" KEYS\n");
  if (!mark)
    {
      fprintf (stderr, "mankeys: %s has no line '.\\\" KEYS'\n", argv[1]);
      return 1;
    }
  cleanup_config nsbox_config *defaults = nsbox_config_new (&err);
  FILE *out = fopen (argv[2], "we");
  if (!defaults || !out)
    {
      fprintf (stderr, "mankeys: %s\n", defaults ? strerror (errno) : nsbox_error_message (err));
      if (out)
        fclose (out);
      return 1;
    }
  fwrite (template, 1, (size_t)(mark - template) + 1, out);
  int ret = 0;
  for (size_t i = 0; ret == 0 && nsbox_config_key_at (i); i++)
    ret = put_key (out, defaults, nsbox_config_key_at (i));
  fputs (mark + strlen ("\n.\\\" KEYS\n"), out);
  if (fclose (out) != 0 || ret < 0)
    {
      remove (argv[2]);
      return 1;
    }
  return 0;
}
