/* shmkv.h - header-only reader for shmkv images (C11, also valid C++17).
 *
 * Depends on libc and xxhash.h (included with XXH_INLINE_ALL) only.
 * Format: lib/FORMAT.md. Control segment protocol: lib/PROTOCOL.md.
 * Errors: 0 or negative (-errno or SHMKV_E*, in [-31299, -31200]), named by
 * shmkv_strerror() and shmkv_errname(); nothing here sets errno.
 * Public names are shmkv_*; shmkv__* are internal: don't use them directly.
 *
 * Contents
 *   Open and close (shmkv/open.h, shmkv/handle.h, shmkv/verify.h)
 *     int  shmkv_open_file(path, flags, &db)         map an image read-only
 *     int  shmkv_open_file_diag(path, flags, &db, why, why_len)  same, with the reason
 *     void shmkv_close(db)                           NULL is ignored
 *     int  shmkv_image_check(base, size, flags, why, why_len)    check bytes in memory
 *     int  shmkv_verify(db, why, why_len)            full structural walk
 *     flags: SHMKV_OPEN_NOVERIFY (skip section checksums), SHMKV_OPEN_POPULATE,
 *            SHMKV_OPEN_DEEP (also shmkv_verify at open), SHMKV_OPEN_HUGEPAGES
 *            (huge pages for an image on tmpfs now: MADV_COLLAPSE, Linux 6.1+)
 *   Attach to a loader-managed cache (shmkv/attach.h; lib/PROTOCOL.md)
 *     int  shmkv_attach(name, flags, &db)            root from $SHMKV_ROOT or /run/shmkv
 *     int  shmkv_attach_diag(root, name, flags, &db, why, why_len)  same, with the reason
 *     int  shmkv_attach_node(root, name, node, flags, &db, why, why_len)  the copy of NUMA
 *            node (numa=replicate), else the nearest; attach uses the calling thread's node
 *     int  shmkv_node(db)                            node of the copy read (-1: not pinned)
 *     int  shmkv_refresh(db)                         0 unchanged, 1 moved to a new generation
 *     uint64_t shmkv_generation(db)                  generation served (0: a file handle)
 *     flags: SHMKV_ATTACH_VERIFY (checksums at attach), SHMKV_OPEN_DEEP
 *     A get never mixes two generations; values stay valid until the next
 *     refresh that returns 1, or close. Mappings are read-only (PROT_READ of
 *     O_RDONLY descriptors): a reader cannot write the cache.
 *   Lookups (shmkv/get.h, shmkv/batch.h; no system call, no allocation;
 *   values point into the image; an image with expiry reads the clock)
 *     int  shmkv_get(db, key, key_len, &value)       any type
 *     int  shmkv_get_i64 / _f64 / _bool / _str / _bytes
 *     int  shmkv_get_f32list / _f64list / _i64list   zero-copy arrays
 *     int  shmkv_get_strlist(db, key, key_len, &list)
 *          shmkv_value_strlist(&value, &list)        a string list from shmkv_get's value
 *          size_t shmkv_strlist_count(&list), shmkv_strlist_at(&list, i, &len)
 *     Typed getters return SHMKV_ETYPE on a type mismatch: nothing is converted.
 *     size_t shmkv_get_batch(db, keys, n, values, errs)  many keys, prefetched in groups
 *     int  shmkv_get_diag(db, key, key_len, &value, why, why_len)  shmkv_get + the reason
 *     Every offset a lookup follows is checked against its section (FORMAT.md
 *     §12.1): no image, however forged, even opened with SHMKV_OPEN_NOVERIFY or
 *     attached, makes a get, a batch, a string list or an iteration read
 *     outside it; damage on a key's path is SHMKV_ECORRUPT.
 *   Iteration
 *   Iteration (shmkv/iter.h; FORMAT.md §18)
 *     shmkv_iter_init(db, &it); while (shmkv_iter_next(&it, &k, &klen, &v) == 0) ...
 *                                                 the live entries (an expired one is absent)
 *     shmkv_iter_init_all(db, &it)                every record, expired ones too
 *     uint32_t shmkv_iter_expires(&it)            expiry of the entry just returned (0: none)
 *   Expiry (FORMAT.md §17; shmkv/get.h): an expired entry is absent
 *     int  shmkv_get_expires(db, key, key_len, &expires)  expiry of a key, expired or not
 *     void shmkv_set_clock(db, now)                  pin "now" (unix seconds; 0: real clock)
 *   USDT probes (shmkv/trace.h; perf/README.md), opt-in: -DSHMKV_USDT=1 for every
 *     file including <shmkv.h>, and #define SHMKV_USDT_SEMAPHORES 1 in one of them
 *   Value types (shmkv/types.h): one row each, FORMAT.md §8
 *     const shmkv_type_desc *shmkv_type_desc_of(type)  name, alignment, NUL, shape; NULL: no type
 *     unsigned shmkv_type_by_name(name)              the type a name stands for, or 0
 *   Errors and misc (shmkv/errors.h, shmkv/types.h, shmkv/probe.h)
 *     const char *shmkv_strerror(err)                message ("key not found", strerror)
 *     const char *shmkv_errname(err)                 symbol ("SHMKV_ENOTFOUND", "ENOENT")
 *     const char *shmkv_file_kind(st_mode)           "a FIFO", "a directory", ... (error messages)
 *     int  shmkv_vfail(err, why, why_len, fmt, ap)   the why/why_len convention: message, err back
 *     const char *shmkv_type_name(type), shmkv_vector_name()
 *     const shmkv_image_header *shmkv_header(db)
 *   Cache names and control segments (shmkv/ctl.h), for readers, shmctl and the loader
 *     int  shmkv_name_check(name)                    0, or -EINVAL (SHMKV_CACHE_NAME_RULE)
 *     const char *shmkv_ctl_root(root)               root, else $SHMKV_ROOT, else /run/shmkv
 *     int  shmkv_ctl_path(root, name, buf, len)      ROOT/NAME.ctl
 *     int  shmkv_ctl_open(root, name, flags, &ctl, why, why_len)  map and check one
 *     void shmkv_ctl_close(ctl)
 *     int  shmkv_ctl_read(ctl, &copy)                consistent copy (seqcount read)
 *     uint64_t shmkv_ctl_generation(ctl)             one acquire load
 *     int  shmkv_ctl_mid_update(ctl)                 1 while seq is odd
 *     the loader only: shmkv_ctl_init(&ctl), shmkv_ctl_open(..., SHMKV_CTL_RDWR, ...),
 *     int  shmkv_ctl_publish(ctl, generation, segs, n, loader_pid, published_ns)
 *   Format functions for builders and inspectors (shmkv/tools.h; FORMAT.md §5-9)
 *     uint64_t shmkv_key_hash(seed, hash_bits, key, len), shmkv_home_bucket(hash, buckets),
 *              shmkv_key_tag(hash)
 *     unsigned shmkv_filter_index(tag), shmkv_dir_entry(tag, off), shmkv_dir_end(n)
 *     unsigned shmkv_record_span(pos, kind, key_len, value_len, &key_pos, &val_pos)
 *     int      shmkv_record_at(bucket, i, &record)            record i of a bucket, checked
 *     unsigned shmkv_record_tag_bits(bucket, i)               its directory's 9 tag bits
 *     uint64_t shmkv_bucket_displacement(bucket, tag, max_probe)  later buckets to search
 *     int      shmkv_type_align8(type); uint64_t shmkv_entry_value_pos(&entry_header)
 *     uint64_t shmkv_value_stored_len(type, len), shmkv_entry_size(type, shared, klen, vlen)
 *     int      shmkv_value_check(type, p, len, why, why_len)
 *     int      shmkv_entry_at(db, offset, &entry, why, why_len)  bounds-checked decode
 *     const char *shmkv_section_name(kind)
 *     int      shmkv_find_record(db, key, len, &offset, &expires) the reader's lookup, as an offset
 *     int      shmkv_zero_check(db, from, to, what, why, why_len) padding is zero
 *     int      shmkv_utf8_valid(p, n), size_t shmkv_utf8_seq_len(p, n)  (shmkv/utf8.h)
 *              strict UTF-8: the one check, 1/0; one sequence's length, 0 if none
 *     int      shmkv_bind_mem(&db, base, size, flags, why, why_len) a handle over memory
 *              the caller owns (checked as shmkv_image_check; never shmkv_close it)
 *
 * Return values (why/why_len, where taken, receive a one-line reason naming
 * the file, section or offset; NULL/0 to skip it)
 *   shmkv_get, shmkv_get_diag: 0; SHMKV_ENOTFOUND (absent or expired); SHMKV_EKEYLEN
 *               (key over 65535 bytes); SHMKV_ECORRUPT (a damaged record, entry or
 *               value on the key's path; a string that is not UTF-8). Outputs
 *               untouched on error.
 *   shmkv_get_i64 ... _strlist (typed): as shmkv_get, and SHMKV_ETYPE (another
 *               type). What they return has its type's shape (i64/f64 8 bytes,
 *               bool one byte 0 or 1, lists whole elements).
 *   shmkv_get_batch: the number of keys found; errs[i] as shmkv_get's.
 *   shmkv_value_strlist: 0; SHMKV_ETYPE (not a strlist); SHMKV_ECORRUPT (count
 *               does not fit the value); the list is empty on error.
 *   shmkv_strlist_at: string i; NULL when i >= count (*len untouched) or when
 *               string i is damaged (*len 0): never bytes outside the list.
 *   shmkv_open_file*: 0; -errno (open/fstat/mmap: -ENOENT, -EACCES, -ENOMEM...);
 *               -EINVAL (unknown flags); SHMKV_EMAGIC, SHMKV_EVERSION, SHMKV_ELAYOUT,
 *               SHMKV_ETRUNCATED, SHMKV_ECHECKSUM, SHMKV_ECORRUPT.
 *   shmkv_image_check, shmkv_verify: 0; the image errors above.
 *   shmkv_attach*: 0; -ENOENT (no such cache); -EINVAL (bad name or flags);
 *               -EAGAIN (nothing published yet, or the control segment stays
 *               mid-update: try again); SHMKV_EPROTO (not a control segment
 *               of this protocol); other -errno; image errors as shmkv_open_file.
 *   shmkv_refresh: 0 (unchanged, or a file handle); 1 (moved: values from before
 *               are invalid); < 0 as shmkv_attach, the handle still serving
 *               its old generation.
 *   shmkv_iter_next: 0; SHMKV_EEND (every record passed);
 *               SHMKV_ECORRUPT (the next record is damaged: every later call
 *               returns it too).
 *   shmkv_name_check: 0; -EINVAL.   shmkv_ctl_path: 0; -EINVAL; -ENAMETOOLONG.
 *   shmkv_ctl_open: 0; -ENOENT; -EINVAL; -ELOOP (a symlink); -ENAMETOOLONG;
 *               other -errno; SHMKV_EPROTO (not a control segment of this
 *               protocol, not a regular file, or with SHMKV_CTL_RDWR not ours alone).
 *   shmkv_ctl_read: 0; -EAGAIN (seq stays odd); SHMKV_EPROTO (impossible contents).
 *   shmkv_ctl_publish: 0; -EINVAL (more than SHMKV_CTL_MAX_SEGMENTS, or generation 0).
 *   shmkv_value_check, shmkv_entry_at, shmkv_record_at, shmkv_zero_check: 0;
 *               SHMKV_ECORRUPT.
 *   shmkv_find_record, shmkv_get_expires: 0; SHMKV_ENOTFOUND; SHMKV_EKEYLEN;
 *               SHMKV_ECORRUPT.
 *   shmkv_bind_mem: 0; the errors of shmkv_image_check.
 *   shmkv_strerror, shmkv_errname, *_name: never NULL (static strings).
 *   shmkv_vfail: err, as given.
 *
 * Lifetime: pointers obtained from a handle stay valid until shmkv_close()
 * (and, for an attached handle, until a shmkv_refresh() that returns 1).
 * Images must be replaced by rename, never rewritten in place (the builder does
 * so): truncating a mapped file would fault readers.
 *
 * Threads: lookups, iteration and shmkv_generation() only read the handle:
 * any number of threads may run them on one handle at once. shmkv_refresh()
 * and shmkv_close() change it (refresh unmaps the old image): call them only
 * when no other thread is using that handle. The simple pattern: one handle
 * per thread (attach is cheap: each maps the same pages), each thread
 * refreshing its own between requests. Handles share nothing, so threads
 * never wait on each other.
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

/* The public API, top down: each header includes only those below it. */
#include "shmkv/attach.h"
#include "shmkv/tools.h"
#include "shmkv/batch.h"
#include "shmkv/iter.h"
#include "shmkv/get.h"

#endif /* SHMKV_H */
