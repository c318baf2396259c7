/* Acceptance case 13 across every way in: the same image pushed to a real
 * registry and pulled, imported as oci:, oci-archive: and docker-archive:,
 * yields one rootfs tree (same content hash, same ChainID directory). */
#include <criterion/criterion.h>

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_helpers.h"
#include "servers.h"

TestSuite (same_tree, .fini = servers_stop_all);

/* The ChainID directory of an unpacked rootfs: rootfs/<chainid>.<ver>/rootfs. */
static char *
chain_dir (const char *rootfs)
{
  char *copy = strdup (rootfs);
  cr_assert_not_null (copy);
  char *name = strdup (basename (dirname (copy)));
  free (copy);
  return name;
}

Test (same_tree, registry_pull_and_offline_inputs_give_one_tree, .timeout = 300)
{
  struct fx fx;
  fx_setup (&fx);
  build_image (&fx, "l = layer()\n"
                    "D(l, 'etc'); F(l, 'etc/hello', 'hi'); S(l, 'link', 'etc/hello')\n"
                    "H(l, 'hard', 'etc/hello'); D(l, 'usr', mode=0o755, mtime=1000000000)\n"
                    "F(l, 'usr/tool', mode=0o755)\n"
                    "l = layer()\n"
                    "F(l, 'etc/.wh.hello'); F(l, 'etc/new', 'new')\n");
  struct server reg;
  registry_start (&reg, test_path ("registry"), NULL);
  char ref[128];
  snprintf (ref, sizeof ref, "127.0.0.1:%u/test/same:t", reg.port);
  free (sh_ok (&fx,
               "skopeo copy --quiet --dest-tls-verify=false oci:oci:t docker://%s && "
               "skopeo copy --quiet oci:oci:t oci-archive:image.oci.tar:t && "
               "skopeo copy --quiet oci:oci:t docker-archive:image.docker.tar:test/same:t",
               ref));

  char *from_registry = sh_ok (&fx,
                               "\"$IMG\" --store \"$T/s1\" pull '%s' >/dev/null && "
                               "\"$IMG\" --store \"$T/s1\" rootfs '%s'",
                               ref, ref);
  char *from_oci = sh_ok (&fx, "\"$IMG\" --store \"$T/s2\" import oci:oci:t >/dev/null && "
                               "\"$IMG\" --store \"$T/s2\" rootfs " IMAGE_REF);
  char *from_oci_archive
      = sh_ok (&fx, "\"$IMG\" --store \"$T/s3\" import oci-archive:image.oci.tar:t "
                    "| cut -d' ' -f1 | xargs \"$IMG\" --store \"$T/s3\" rootfs");
  char *from_docker
      = sh_ok (&fx, "\"$IMG\" --store \"$T/s4\" import docker-archive:image.docker.tar "
                    "| cut -d' ' -f1 | xargs \"$IMG\" --store \"$T/s4\" rootfs");

  const char *others[] = { from_oci, from_oci_archive, from_docker };
  const char *names[] = { "oci", "oci-archive", "docker-archive" };
  char *hash = tree_hash (from_registry);
  char *chain = chain_dir (from_registry);
  cr_assert (path_exists (from_registry), "no tree at '%s'", from_registry);
  for (size_t i = 0; i < 3; i++)
    {
      char *other_hash = tree_hash (others[i]);
      char *other_chain = chain_dir (others[i]);
      cr_expect_str_eq (other_hash, hash, "the %s tree differs from the registry's", names[i]);
      cr_expect_str_eq (other_chain, chain, "the %s ChainID differs from the registry's", names[i]);
      free (other_hash);
      free (other_chain);
    }
  free (hash);
  free (chain);
  free (from_registry);
  free (from_oci);
  free (from_oci_archive);
  free (from_docker);
  assert_victim_unchanged (&fx);
  fx_teardown (&fx);
}
