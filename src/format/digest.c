/* Section digests checked at open; see digest.h. */
#include "format/digest.h"
#include "format/weight_source.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "util/file.h"

#define MAX_THREADS 16

typedef struct {
  const wisp_artifact *a;
  const char **want;   /* per section: the recorded hex digest, or NULL */
  atomic_int next;     /* the next section to hash */
  atomic_int bad;      /* 1 + the index of a section that differs, or 0 */
  atomic_int unread;   /* 1 + the index of a section that could not be read, or 0 */
} digest_job;

static void *hash_sections(void *arg) {
  digest_job *j = arg;
  for (;;) {
    const int i = atomic_fetch_add(&j->next, 1);
    if (i >= j->a->n_sections || atomic_load(&j->bad)) break;
    if (!j->want[i]) continue;
    const wisp_section *s = &j->a->sections[i];
    char got[65];
    if (wisp_weights_sha256_hex(wisp_section_data(j->a, s), (size_t)s->bytes, got)) {
      /* a streamed section that could not be read (format/weight_source.h) */
      int none = 0;
      atomic_compare_exchange_strong(&j->unread, &none, i + 1);
      atomic_compare_exchange_strong(&j->bad, &none, i + 1);
    } else if (strcmp(got, j->want[i])) {
      int none = 0;
      atomic_compare_exchange_strong(&j->bad, &none, i + 1);
    }
  }
  return NULL;
}

wisp_status wisp_artifact_check_digests(const wisp_artifact *a) {
  if (a->n_sections <= 0) return WISP_OK;
  const char **want = calloc((size_t)a->n_sections, sizeof *want);
  if (!want) return wisp_fail(WISP_ENOMEM, "out of memory");
  const cJSON *e;
  int i = 0, n_want = 0;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(a->runtime, "sections")) {
    if (i >= a->n_sections) break;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(e, "sha256");
    if (cJSON_IsString(h) && strlen(h->valuestring) == 64) { want[i] = h->valuestring; n_want++; }
    i++;
  }
  digest_job j = {.a = a, .want = want};
  atomic_init(&j.next, 0);
  atomic_init(&j.bad, 0);
  atomic_init(&j.unread, 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int n = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : (int)cores;
  if (n > n_want) n = n_want > 0 ? n_want : 1;
  pthread_t th[MAX_THREADS];
  int started = 0;
  while (started < n - 1 && pthread_create(&th[started], NULL, hash_sections, &j) == 0) started++;
  hash_sections(&j); /* the caller is one of the threads */
  for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
  free(want);
  const int bad = atomic_load(&j.bad);
  if (!bad) return WISP_OK;
  if (atomic_load(&j.unread) == bad) { /* the read's own error, as wisp_fail set it */
    wisp_error_prefix("%s/weights.bin: section '%s'", a->dir ? a->dir : "?", a->sections[bad - 1].name);
    return WISP_EIO;
  }
  return wisp_fail(WISP_EHASH, "%s/weights.bin: section '%s' does not match its sha256 in the manifest (the file is "
                   "damaged or was changed; wisp verify lists every section)",
                   a->dir ? a->dir : "?", a->sections[bad - 1].name);
}
