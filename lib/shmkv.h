/* shmkv.h - header-only reader for shmkv images (C11, also valid C++17).
 *
 * Depends on libc and xxhash.h (included with XXH_INLINE_ALL) only.
 * Format: lib/FORMAT.md. Errors: 0 or negative (-errno or SHMKV_E*), named by
 * shmkv_strerror(); nothing here sets errno.
 *
 * Contents
 *   Open and close
 *     int  shmkv_open_file(path, flags, &db)         map an image read-only
 *     int  shmkv_open_file_diag(path, flags, &db, why, why_len)  same, with the reason
 *     void shmkv_close(db)
 *     int  shmkv_image_check(base, size, flags, why, why_len)    check bytes in memory
 *     int  shmkv_verify(db, why, why_len)            full structural walk
 *     flags: SHMKV_OPEN_NOVERIFY (skip section checksums), SHMKV_OPEN_POPULATE,
 *            SHMKV_OPEN_DEEP (also shmkv_verify at open), SHMKV_OPEN_HUGEPAGES
 *            (huge pages for an image on tmpfs now: MADV_COLLAPSE, Linux 6.1+)
 *   Attach to a loader-managed cache (lib/PROTOCOL.md)
 *     int  shmkv_attach(name, flags, &db)            root from $SHMKV_ROOT or /run/shmkv
 *     int  shmkv_attach_diag(root, name, flags, &db, why, why_len)
 *     int  shmkv_refresh(db)                         1 if it moved to a new generation
 *     uint64_t shmkv_generation(db)
 *     int  shmkv_ctl_read(ctl, &copy)               consistent copy of a control segment
 *     flags: SHMKV_ATTACH_VERIFY (checksums at attach), SHMKV_OPEN_DEEP
 *     A get never mixes two generations; values stay valid until the next
 *     refresh that returns 1, or close. Mappings are read-only (PROT_READ of
 *     O_RDONLY descriptors): a reader cannot write the cache.
 *   Lookups (no system call, no allocation; values point into the image)
 *     int  shmkv_get(db, key, key_len, &value)       any type
 *     int  shmkv_get_i64 / _f64 / _bool / _str / _bytes
 *     int  shmkv_get_f32list / _f64list / _i64list   zero-copy arrays
 *     int  shmkv_get_strlist(db, key, key_len, &list)
 *          shmkv_strlist_count(&list), shmkv_strlist_at(&list, i, &len)
 *     Typed getters return SHMKV_ETYPE on a type mismatch: nothing is converted.
 *     size_t shmkv_get_batch(db, keys, n, values, errs)  many keys, prefetched in groups
 *   Iteration
 *     shmkv_iter_init(db, &it); while (shmkv_iter_next(&it, &k, &klen, &v) == 0) ...
 *   Misc
 *     const char *shmkv_strerror(err), shmkv_type_name(type), shmkv_vector_name()
 *     const shmkv_image_header *shmkv_header(db)
 *
 * Return values
 *   shmkv_get*: 0; SHMKV_ENOTFOUND (absent); SHMKV_EKEYLEN (key over 65535 bytes);
 *               SHMKV_ETYPE (typed getters only).
 *   shmkv_open_file*: 0; -errno (open/fstat/mmap); SHMKV_EMAGIC, SHMKV_EVERSION,
 *               SHMKV_ELAYOUT, SHMKV_ETRUNCATED, SHMKV_ECHECKSUM, SHMKV_ECORRUPT.
 *   shmkv_iter_next: 0; SHMKV_EEND; SHMKV_ECORRUPT.
 *
 * Lifetime: pointers obtained from a handle stay valid until shmkv_close().
 * A handle is immutable after open: any number of threads may read through it.
 * Images must be replaced by rename, never rewritten in place (the builder does
 * so): truncating a mapped file would fault readers.
 *
 * Example
 *   shmkv *db;
 *   int err = shmkv_open_file("features.shmkv", 0, &db);
 *   if (err) { fprintf(stderr, "%s\n", shmkv_strerror(err)); return 1; }
 *   const float *vec; size_t n;
 *   if (shmkv_get_f32list(db, "user:42", 7, &vec, &n) == 0) use(vec, n);
 *   shmkv_close(db);
 */
#ifndef SHMKV_H
#define SHMKV_H

#define SHMKV_VERSION_MAJOR 0
#define SHMKV_VERSION_MINOR 1
#define SHMKV_VERSION_PATCH 0

#include "shmkv/format.h"
#include "shmkv/errors.h"
#include "shmkv/probe.h"
#include "shmkv/handle.h"
#include "shmkv/get.h"
#include "shmkv/verify.h"
#include "shmkv/batch.h"
#include "shmkv/attach.h"

#endif /* SHMKV_H */
