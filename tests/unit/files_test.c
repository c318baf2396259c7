/* Files in and out, the parts that need no sandbox: which names are
 * allowed, PATH[:NAME] specs, and how collected and refused files show in
 * the JSON and the text result. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "files.h"
#include "result.h"

Test (files, names_allowed_and_refused, .timeout = 5)
{
  static const char *const good[] = {
    "a",  "data.csv", ".hidden", "-dash", "sp ace", "r\xc3\xa9sum\xc3\xa9", "\xf0\x9f\x93\x88.png",
    "..."
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    cr_expect (nsbox_file_name_valid (good[i], strlen (good[i]), NULL), "'%s' refused", good[i]);
  static const struct
  {
    const char *name;
    const char *why;
  } bad[] = {
    { "", "it is empty" },
    { ".", "it is '.' or '..'" },
    { "..", "it is '.' or '..'" },
    { "a/b", "it holds a '/' or ':'" },
    { "a:b", "it holds a '/' or ':'" },
    { "tab\there", "it holds a control character" },
    { "nl\n", "it holds a control character" },
    { "del\x7f", "it holds a control character" },
    { "\xff", "it is not valid UTF-8" },
    { "\xc0\xaf", "it is not valid UTF-8" },         /* overlong '/' */
    { "\xed\xa0\x80", "it is not valid UTF-8" },     /* a surrogate */
    { "\xf4\x90\x80\x80", "it is not valid UTF-8" }, /* past U+10FFFF */
    { "cut\xe2\x82", "it is not valid UTF-8" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      const char *why = NULL;
      cr_expect (!nsbox_file_name_valid (bad[i].name, strlen (bad[i].name), &why), "'%s' allowed",
                 bad[i].name);
      cr_expect_str_eq (why ? why : "", bad[i].why, "'%s'", bad[i].name);
    }
  char name[257];
  memset (name, 'n', sizeof name);
  cr_expect (nsbox_file_name_valid (name, 255, NULL));
  const char *why = NULL;
  cr_expect (!nsbox_file_name_valid (name, 256, &why));
  cr_expect_str_eq (why, "it is longer than 255 bytes");
  cr_expect (!nsbox_file_name_valid ("a\0b", 3, NULL), "a NUL inside is a control character");
}

Test (files, specs_split_at_the_last_colon, .timeout = 5)
{
  static const struct
  {
    const char *spec, *path, *name;
  } cases[] = {
    { "/data/x.csv", "/data/x.csv", "x.csv" },
    { "x.csv", "x.csv", "x.csv" },
    { "/data/x.csv:y.csv", "/data/x.csv", "y.csv" },
    { "/a:b/x:y", "/a:b/x", "y" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      char *path = NULL, *name = NULL;
      struct nsbox_error *err = NULL;
      cr_assert_eq (nsbox_input_spec_parse (cases[i].spec, &path, &name, &err), 0, "%s: %s",
                    cases[i].spec, nsbox_error_message (err));
      cr_expect_str_eq (path, cases[i].path);
      cr_expect_str_eq (name, cases[i].name);
      free (path);
      free (name);
    }
  static const char *const bad[] = { ":x", "/data/", "/data/x:", "/data/x:a/b" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      char *path = NULL, *name = NULL;
      struct nsbox_error *err = NULL;
      cr_expect_eq (nsbox_input_spec_parse (bad[i], &path, &name, &err), -EINVAL, "%s", bad[i]);
      cr_expect_null (path);
      cr_expect_null (name);
      cr_expect (err && strstr (nsbox_error_message (err), bad[i]), "the error names '%s'", bad[i]);
      nsbox_error_free (err);
    }
}

static nsbox_result *
result_with_files (void)
{
  nsbox_result *r = calloc (1, sizeof *r);
  cr_assert_not_null (r);
  r->stdout_buf = strdup ("");
  r->stderr_buf = strdup ("");
  r->runtime = "native";
  r->n_files = 2;
  r->files = calloc (2, sizeof *r->files);
  r->files[0] = (struct nsbox_result_file){ strdup ("a.csv"), 12, "" };
  strcpy (r->files[0].sha256, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  r->files[1] = (struct nsbox_result_file){ strdup ("plot.png"), 3, "" };
  strcpy (r->files[1].sha256, "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210");
  r->n_refused = 2;
  r->refused = calloc (2, sizeof *r->refused);
  r->refused[0]
      = (struct nsbox_result_refusal){ strdup ("bad\n\xff"), strdup ("name not allowed") };
  r->refused[1] = (struct nsbox_result_refusal){ strdup ("link"), strdup ("a symbolic link") };
  return r;
}

Test (files, json_lists_files_and_refusals_with_valid_utf8, .timeout = 5)
{
  nsbox_result *r = result_with_files ();
  cr_expect_eq (nsbox_result_file_count (r), 2);
  cr_expect_str_eq (nsbox_result_file_name (r, 1), "plot.png");
  cr_expect_eq (nsbox_result_file_size (r, 0), 12);
  cr_expect_null (nsbox_result_file_name (r, 2));
  cr_expect_eq (nsbox_result_refused_count (r), 2);
  cr_expect_str_eq (nsbox_result_refused_reason (r, 1), "a symbolic link");
  cr_expect_null (nsbox_result_refused_reason (r, 2));
  struct nsbox_error *err = NULL;
  char *text = nsbox_result_to_json (r, &err);
  cr_assert_not_null (text, "%s", nsbox_error_message (err));
  json_error_t jerr;
  json_t *root = json_loads (text, 0, &jerr);
  cr_assert_not_null (root, "%s: %s", jerr.text, text);
  json_t *files = json_object_get (root, "files");
  cr_assert (json_is_array (files) && json_array_size (files) == 2, "%s", text);
  json_t *f = json_array_get (files, 0);
  cr_expect_str_eq (json_string_value (json_object_get (f, "name")), "a.csv");
  cr_expect_eq (json_integer_value (json_object_get (f, "size")), 12);
  cr_expect_str_eq (json_string_value (json_object_get (f, "sha256")),
                    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  json_t *refused = json_object_get (root, "files_refused");
  cr_assert (json_is_array (refused) && json_array_size (refused) == 2, "%s", text);
  cr_expect_str_eq (json_string_value (json_object_get (json_array_get (refused, 0), "name")),
                    "bad\n\xef\xbf\xbd");
  /* The server's answer rebuilt: the same lists. */
  nsbox_result *back = NULL;
  cr_assert_eq (nsbox_result_from_json (text, strlen (text), &back, &err), 0, "%s",
                nsbox_error_message (err));
  cr_expect_eq (nsbox_result_file_count (back), 2);
  cr_expect_str_eq (nsbox_result_file_sha256 (back, 1),
                    "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210");
  cr_expect_eq (nsbox_result_refused_count (back), 2);
  cr_expect_str_eq (nsbox_result_refused_name (back, 1), "link");
  nsbox_result_free (back);
  json_decref (root);
  free (text);
  nsbox_result_free (r);
}

Test (files, text_lists_each_file_on_one_line, .timeout = 5)
{
  nsbox_result *r = result_with_files ();
  struct nsbox_error *err = NULL;
  char *text = nsbox_result_to_text (r, &err);
  cr_assert_not_null (text, "%s", nsbox_error_message (err));
  cr_expect_str_eq (text, "exit code: 0\n"
                          "file: /tmp/out/a.csv (12 bytes)\n"
                          "file: /tmp/out/plot.png (3 bytes)\n"
                          "file not collected: /tmp/out/bad?\xef\xbf\xbd (name not allowed)\n"
                          "file not collected: /tmp/out/link (a symbolic link)\n"
                          "--- stdout ---\n(empty)\n--- stderr ---\n(empty)\n");
  free (text);
  nsbox_result_free (r);
}
