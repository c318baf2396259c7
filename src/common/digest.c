/* SHA-256 through libcrypto's EVP interface, loaded on first use. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include <openssl/evp.h>

#include "digest.h"
#include "dl.h"

static struct
{
  __typeof__ (EVP_MD_CTX_new) *ctx_new;
  __typeof__ (EVP_MD_CTX_free) *ctx_free;
  __typeof__ (EVP_sha256) *sha256;
  __typeof__ (EVP_DigestInit_ex) *init;
  __typeof__ (EVP_DigestUpdate) *update;
  __typeof__ (EVP_DigestFinal_ex) *final;
} crypto;
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static int crypto_status;
static char crypto_why[256];

static void
crypto_load (void)
{
  const struct nsbox_dl_symbol symbols[] = {
    { "EVP_MD_CTX_new", (void **)&crypto.ctx_new },
    { "EVP_MD_CTX_free", (void **)&crypto.ctx_free },
    { "EVP_sha256", (void **)&crypto.sha256 },
    { "EVP_DigestInit_ex", (void **)&crypto.init },
    { "EVP_DigestUpdate", (void **)&crypto.update },
    { "EVP_DigestFinal_ex", (void **)&crypto.final },
  };
  crypto_status = nsbox_dl_load ("libcrypto.so.3", symbols, ARRAY_SIZE (symbols), crypto_why,
                                 sizeof crypto_why);
}

int
nsbox_sha256_init (struct nsbox_sha256 *h, struct nsbox_error **err)
{
  h->ctx = NULL;
  pthread_once (&crypto_once, crypto_load);
  if (crypto_status < 0)
    return nsbox_error_set (err, -crypto_status, "SHA-256: %s", crypto_why);
  EVP_MD_CTX *ctx = crypto.ctx_new ();
  if (!ctx)
    return nsbox_error_oom (err);
  if (crypto.init (ctx, crypto.sha256 (), NULL) != 1)
    {
      crypto.ctx_free (ctx);
      return nsbox_error_set (err, ENOMEM, "SHA-256: the digest could not be started");
    }
  h->ctx = ctx;
  return 0;
}

int
nsbox_sha256_update (struct nsbox_sha256 *h, const void *data, size_t len)
{
  if (len && crypto.update (h->ctx, data, len) != 1)
    return -ENOMEM;
  return 0;
}

int
nsbox_sha256_final (struct nsbox_sha256 *h, char hex[NSBOX_SHA256_HEX])
{
  unsigned char digest[32];
  unsigned int len = 0;
  if (crypto.final (h->ctx, digest, &len) != 1 || len != sizeof digest)
    return -ENOMEM;
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof digest; i++)
    {
      hex[2 * i] = digits[digest[i] >> 4];
      hex[2 * i + 1] = digits[digest[i] & 0xf];
    }
  hex[64] = '\0';
  return 0;
}

void
nsbox_sha256_free (struct nsbox_sha256 *h)
{
  if (h->ctx)
    crypto.ctx_free (h->ctx);
  h->ctx = NULL;
}

int
nsbox_sha256_hex (const void *data, size_t len, char hex[NSBOX_SHA256_HEX],
                  struct nsbox_error **err)
{
  struct nsbox_sha256 h;
  int ret = nsbox_sha256_init (&h, err);
  if (ret < 0)
    return ret;
  if (nsbox_sha256_update (&h, data, len) < 0 || nsbox_sha256_final (&h, hex) < 0)
    ret = nsbox_error_set (err, ENOMEM, "SHA-256: the digest failed");
  nsbox_sha256_free (&h);
  return ret;
}
