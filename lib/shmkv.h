/* shmkv.h - header-only reader for shmkv images (C11, also valid C++17).
 *
 * Depends on libc and xxhash.h (included with XXH_INLINE_ALL) only.
 * Format: lib/FORMAT.md (format 2; format 1 is refused with SHMKV_EVERSION,
 * naming `shmctl image upgrade`). Control segment protocol: lib/PROTOCOL.md.
 * Errors: 0 or negative (-errno or SHMKV_E*, in [-31299, -31200]), named by
 * shmkv_strerror() and shmkv_errname(); nothing here sets errno.
 * Public names are shmkv_*; shmkv__* are internal: don't use them directly.
 * lib/README.md documents each function; packaging/test/docs_test.py checks
 * that this list, its return values and lib/README.md's name the same
 * functions and codes.
 *
 * Contents
 *   Open and close (shmkv/open.h, shmkv/handle.h, shmkv/verify.h)
 *     shmkv_open_file(path, flags, &db), shmkv_open_file_diag(path, flags, &db, why, why_len)
 *     shmkv_close(db)                                NULL is ignored
 *     shmkv_header_check(header, size, why, why_len) the first 512 bytes alone
 *     shmkv_image_check(base, size, flags, why, why_len)  bytes in memory
 *     shmkv_verify(db, why, why_len)                 the full structural walk
 *     shmkv_header(db)                               the image header
 *     flags: SHMKV_OPEN_NOVERIFY (skip section checksums), SHMKV_OPEN_POPULATE,
 *            SHMKV_OPEN_DEEP (also shmkv_verify at open), SHMKV_OPEN_HUGEPAGES
 *   Attach to a loader-managed cache (shmkv/attach.h; lib/PROTOCOL.md)
 *     shmkv_attach(name, flags, &db)                 root from $SHMKV_ROOT or /run/shmkv
 *     shmkv_attach_diag(root, name, flags, &db, why, why_len)
 *     shmkv_attach_node(root, name, node, flags, &db, why, why_len)  a NUMA node's copy
 *     shmkv_refresh(db)                              0 unchanged, 1 moved to a new generation
 *     shmkv_detach(db, &gen)                         hand the mapped generation to a new handle
 *     shmkv_generation(db), shmkv_node(db)           generation served; node of the copy read
 *     flags: SHMKV_ATTACH_VERIFY (checksums at attach), SHMKV_OPEN_DEEP
 *     A get never mixes two generations; values stay valid until the next
 *     refresh that returns 1, or close. Mappings are read-only.
 *   Lookups (shmkv/get.h, shmkv/batch.h; no system call, no allocation;
 *   values point into the image; an image with expiry reads the clock)
 *     shmkv_get(db, key, key_len, &value)            any type
 *     shmkv_get_i64, shmkv_get_f64, shmkv_get_bool, shmkv_get_str, shmkv_get_bytes,
 *     shmkv_get_f32list, shmkv_get_f64list, shmkv_get_i64list, shmkv_get_strlist
 *                                                    typed: SHMKV_ETYPE, nothing converted
 *     shmkv_value_strlist(&value, &list), shmkv_strlist_count(&list),
 *     shmkv_strlist_at(&list, i, &len)               a string list, each string checked
 *     shmkv_get_batch(db, keys, n, values, errs)     many keys, in groups
 *     shmkv_get_diag(db, key, key_len, &value, why, why_len)  shmkv_get + the reason
 *     shmkv_get_expires(db, key, key_len, &expires)  a key's expiry, expired or not
 *     shmkv_set_clock(db, now)                       pin "now" (unix seconds; 0: real clock)
 *     Every offset a lookup follows is checked against its bucket or section
 *     (FORMAT.md §12.1): no image, however forged, even opened with
 *     SHMKV_OPEN_NOVERIFY or attached, makes a get, a batch, a string list or
 *     an iteration read outside it; damage on a key's path is SHMKV_ECORRUPT.
 *   Delta images (shmkv/delta.h; FORMAT.md §19): changes (upserts, tombstones) to a base
 *     shmkv_is_delta(db), shmkv_checksum(db), shmkv_delta_id_of(db, &id)
 *     shmkv_delta_set(db, delta, why, why_len)       read db through delta (NULL: alone)
 *     shmkv_delta_set2(db, lower, top, why, why_len) through two deltas of db: top, then lower
 *   Iteration (shmkv/iter.h; FORMAT.md §18)
 *     shmkv_iter_init(db, &it), shmkv_iter_init_all(db, &it)  live entries; every record
 *     shmkv_iter_next(&it, &key, &key_len, &value), shmkv_iter_expires(&it)
 *     shmkv_count(db, &n)                            the live entries' number
 *   USDT probes (shmkv/trace.h; perf/README.md), opt-in: -DSHMKV_USDT=1 for every
 *     file including <shmkv.h>, and #define SHMKV_USDT_SEMAPHORES 1 in one of them
 *   Value types and errors (shmkv/types.h, shmkv/errors.h, shmkv/probe.h)
 *     shmkv_type_desc_of(type), shmkv_type_name(type), shmkv_type_by_name(name)
 *     shmkv_strerror(err), shmkv_errname(err), shmkv_vfail(err, why, why_len, fmt, ap)
 *     shmkv_file_kind(st_mode), shmkv_vector_name()
 *   Cache names and control segments (shmkv/ctl.h), for readers, shmctl and the loader
 *     shmkv_name_check(name), shmkv_ctl_root(root), shmkv_ctl_path(root, name, buf, len)
 *     shmkv_ctl_open(root, name, flags, &ctl, why, why_len), shmkv_ctl_close(ctl)
 *     shmkv_ctl_open_fd(root, name, flags, &ctl, &fd, why, why_len)
 *     shmkv_ctl_read(ctl, &copy), shmkv_ctl_generation(ctl), shmkv_ctl_mid_update(ctl)
 *     the loader only: shmkv_ctl_init(&ctl), shmkv_ctl_publish(ctl, generation, segs, n,
 *     loader_pid, published_ns), shmkv_ctl_retire(ctl, generation, loader_pid, published_ns)
 *   Format functions for builders and inspectors (shmkv/tools.h; FORMAT.md §5-9)
 *     shmkv_key_hash(seed, hash_bits, key, len), shmkv_home_bucket(hash, buckets),
 *     shmkv_key_tag(hash), shmkv_filter_index(tag), shmkv_dir_entry(tag, off),
 *     shmkv_delta_filter_word(hash, words), shmkv_delta_filter_mask(hash),
 *     shmkv_dir_end(n), shmkv_record_span(pos, kind, key_len, value_len, &key_pos, &val_pos),
 *     shmkv_record_at(bucket, i, &record), shmkv_record_tag_bits(bucket, i),
 *     shmkv_bucket_displacement(bucket, tag, max_probe), shmkv_type_align8(type),
 *     shmkv_entry_value_pos(&entry_header), shmkv_value_stored_len(type, len),
 *     shmkv_entry_size(type, shared, key_len, value_len),
 *     shmkv_value_check(type, p, len, why, why_len), shmkv_section_name(kind),
 *     shmkv_entry_at(db, offset, &entry, why, why_len),
 *     shmkv_find_record(db, key, len, &offset, &expires),
 *     shmkv_zero_check(db, from, to, what, why, why_len),
 *     shmkv_utf8_valid(p, n), shmkv_utf8_seq_len(p, n),
 *     shmkv_bind_mem(&db, base, size, flags, why, why_len)  a handle over memory the caller owns
 *
 * Return values (why/why_len, where taken, receive a one-line reason naming
 * the file, section or offset; NULL/0 to skip it)
 *   shmkv_get, shmkv_get_diag: 0; SHMKV_ENOTFOUND (absent or expired); SHMKV_EKEYLEN
 *               (key over 65535 bytes); SHMKV_ECORRUPT (a damaged record, entry or
 *               value on the key's path; a string that is not UTF-8). Outputs
 *               untouched on error.
 *   shmkv_get_i64, shmkv_get_f64, shmkv_get_bool, shmkv_get_str, shmkv_get_bytes,
 *   shmkv_get_f32list, shmkv_get_f64list, shmkv_get_i64list, shmkv_get_strlist: as
 *               shmkv_get, and SHMKV_ETYPE (another type). What they return has its
 *               type's shape (i64/f64 8 bytes, bool one byte 0 or 1, lists whole
 *               elements).
 *   shmkv_get_expires, shmkv_find_record: as shmkv_get (an expired key is found).
 *   shmkv_get_batch: the number of keys found; errs[i] as shmkv_get's.
 *   shmkv_value_strlist: 0; SHMKV_ETYPE (not a strlist); SHMKV_ECORRUPT (count
 *               does not fit the value); the list is empty on error.
 *   shmkv_strlist_at: string i; NULL when i >= count (*len untouched) or when
 *               string i is damaged (*len 0): never bytes outside the list.
 *   shmkv_iter_next: 0; SHMKV_EEND (every record passed); SHMKV_ECORRUPT (the
 *               next record is damaged: every later call returns it too).
 *   shmkv_count: 0; SHMKV_ECORRUPT (a damaged record on the way).
 *   shmkv_open_file, shmkv_open_file_diag: 0; -errno (open, fstat, mmap); -EINVAL
 *               (unknown flags, not a regular file);
 *               SHMKV_EMAGIC, SHMKV_EVERSION, SHMKV_ELAYOUT, SHMKV_ETRUNCATED,
 *               SHMKV_ECHECKSUM, SHMKV_ECORRUPT.
 *   shmkv_header_check, shmkv_image_check, shmkv_bind_mem: 0; SHMKV_EMAGIC,
 *               SHMKV_EVERSION, SHMKV_ELAYOUT, SHMKV_ETRUNCATED, SHMKV_ECHECKSUM,
 *               SHMKV_ECORRUPT.
 *   shmkv_verify: 0; SHMKV_ECHECKSUM; SHMKV_ECORRUPT.
 *   shmkv_delta_set: 0; SHMKV_EBASE (the delta does not apply to db: another base,
 *               a later delta of a chain, another seed, db itself a delta, or an
 *               image given as the delta); -EINVAL (an attached handle).
 *   shmkv_delta_set2: as shmkv_delta_set, for either delta; -EINVAL also for a
 *               top without a lower.
 *   shmkv_delta_id_of: 0; SHMKV_EBASE (not a delta). shmkv_is_delta: 1 or 0.
 *   shmkv_checksum: the header's checksum.
 *   shmkv_attach, shmkv_attach_diag, shmkv_attach_node: 0; -ENOENT (no such cache);
 *               -EINVAL (bad name, flags or node); -EAGAIN (nothing published yet,
 *               or the control segment stays mid-update: try again); -EPERM (a
 *               segment not owned by the control segment's owner, or writable by
 *               others); SHMKV_EPROTO (not a control segment of this protocol, or
 *               writable by group or others); SHMKV_ESTALE (the cache is being
 *               dropped); other -errno; image errors as shmkv_open_file.
 *   shmkv_refresh: 0 (unchanged, or a file handle); 1 (moved: values from before
 *               are invalid); SHMKV_ESTALE (dropped or replaced: attach again);
 *               < 0 as shmkv_attach, the handle still serving its old generation.
 *   shmkv_detach: 0; -EINVAL (not attached, or nothing mapped); -ENOMEM. The two
 *               handles share the mapping (refresh keeps the base); each close
 *               gives back what the other does not read, from any thread.
 *   shmkv_ctl_close, shmkv_close, shmkv_iter_init, shmkv_iter_init_all, shmkv_set_clock:
 *               nothing (void).
 *   shmkv_name_check: 0; -EINVAL.
 *   shmkv_ctl_path: 0; -EINVAL; -ENAMETOOLONG.
 *   shmkv_ctl_open, shmkv_ctl_open_fd: 0; -ENOENT; -EINVAL; -ELOOP (a symlink);
 *               -ENAMETOOLONG; other -errno; SHMKV_EPROTO (not a control segment
 *               of this protocol, not a regular file, or with SHMKV_CTL_RDWR not
 *               ours alone).
 *   shmkv_ctl_read: 0; -EAGAIN (seq stays odd); SHMKV_EPROTO (impossible contents).
 *   shmkv_ctl_publish, shmkv_ctl_retire: 0; -EINVAL (more than SHMKV_CTL_MAX_SEGMENTS,
 *               or generation 0).
 *   shmkv_value_check, shmkv_entry_at, shmkv_record_at, shmkv_zero_check: 0;
 *               SHMKV_ECORRUPT.
 *   shmkv_vfail: err, as given. shmkv_strerror, shmkv_errname, *_name: never NULL.
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
 * never wait on each other (a generation shmkv_detach hands out shares its
 * mapping with its attached handle through atomic counts: closing it from
 * any thread is safe, also while that handle refreshes).
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
#include "shmkv/delta.h"
#include "shmkv/batch.h"
#include "shmkv/iter.h"
#include "shmkv/get.h"

#endif /* SHMKV_H */
